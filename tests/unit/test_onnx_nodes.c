/* The ONNX backend node tests as a conformance suite (issue 17): every case of Debian's
 * libonnx-testdata (/usr/share/libonnx-testdata/data/node/<case>/model.onnx with
 * test_data_set_N/{input,output}_K.pb) is imported, compiled for Vulkan/lavapipe, run on each of
 * its data sets and compared with the suite's expected outputs at the suite's tolerances
 * (|got - want| <= atol + rtol |want|, rtol 1e-3, atol 1e-7; integers and bools exactly; NaN
 * matches NaN).
 *
 * tests/onnx/node_xfail.txt lists the cases expected to fail, one per line: the case name, then
 * its reason. A failure that is not listed fails the test, and so does a listed case that passes
 * (the list must shrink as relaxc grows). Training operators (domain ai.onnx.preview.training)
 * are left out of the count, as the issue counts them. The summary line gives the pass count.
 *
 *   test_onnx_nodes TESTS_DIR            the whole suite (ctest unit.test_onnx_nodes)
 *   RX_ONNX_NODES=DIR                    another copy of the node tests
 *   RX_ONNX_FILTER=SUBSTR                only the cases whose name contains SUBSTR
 *   RX_ONNX_WHY=1                        print every failure's whole message
 *   RX_ONNX_XFAIL_OUT=FILE               write the failures in the list's format (reasons from
 *                                        the messages), to start or refresh the list by hand
 *   RX_ONNX_REL_L2=TOL                   compare float outputs by relative L2 error
 *                                        |got - want|_2 / |want|_2 <= TOL instead, printing each
 *                                        (the PyTorch exports of tests/onnx/torch_exports) */
/* test-needs: runtime */
#include "base/base.h"
#include "driver/driver.h"
#include "frontends/onnx/onnx_import.h"
#include "ir/ir.h"
#include "relaxc/runtime.h"
#include "support_kernels.h"
#include "targets/target.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RX_HAVE_ONNX

#define RTOL   1e-3
#define ATOL   1e-7
#define MAX_IO 32

typedef struct outcome {
  bool ok;
  char why[512]; /* the first line of the failure's message */
} outcome;

/* The reason of a failure on one line: the message's lines joined with " | " (whole with
 * RX_ONNX_WHY); an importer's list of unsupported nodes shortened to their operators. */
static void set_why(outcome *o, const char *stage, const char *msg) {
  o->ok = false;
  const char *unsup = strstr(msg, "unsupported ONNX node");
  size_t n = (size_t)snprintf(o->why, sizeof o->why, "%s: ", stage);
  if (unsup) n += (size_t)snprintf(o->why + n, sizeof o->why - n, "unsupported operator");
  bool whole = getenv("RX_ONNX_WHY") != NULL;
  for (const char *p = unsup ? strchr(unsup, '\n') : msg; p && *p && n + 4 < sizeof o->why;) {
    if (unsup) { /* "  node 3 'name': Op (opset 7)" -> " Op (opset 7)" */
      const char *q = strstr(p, "': ");
      const char *eol = strchr(p + 1, '\n');
      if (!q || (eol && q > eol)) break;
      int len = eol ? (int)(eol - q - 2) : (int)strlen(q + 2);
      if (!strstr(o->why, q + 2) || strncmp(strstr(o->why, q + 2), q + 2, (size_t)len))
        n += (size_t)snprintf(o->why + n, sizeof o->why - n, "%.*s", len, q + 2);
      p = eol;
    } else if (*p == '\n') {
      if (!whole && n > 200) break;
      n += (size_t)snprintf(o->why + n, sizeof o->why - n, " | ");
      p++;
    } else {
      o->why[n++] = *p++;
      o->why[n] = '\0';
    }
  }
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names of the entries of dir starting with prefix (heap array of heap strings). */
static char **list_dir(const char *dir, const char *prefix, size_t *out_n) {
  *out_n = 0;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix))) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      names = base_realloc(names, cap * sizeof *names);
    }
    names[n++] = base_strdup(e->d_name);
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_names);
  *out_n = n;
  return names;
}

static void free_names(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

/* A TensorProto file: dtype, shape and data (heap, in relaxc's storage). */
typedef rx_onnx_weight pb_tensor;

static rx_status read_pb(const char *path, pb_tensor *t) {
  memset(t, 0, sizeof *t);
  char *bytes = NULL;
  size_t len = 0;
  RX_RETURN_IF_ERROR(base_read_file(path, &bytes, &len));
  rx_status s = onnx_tensor_file(bytes, len, path, t);
  free(bytes);
  return s;
}

static void pb_free(pb_tensor *t) {
  free(t->name);
  free(t->data);
}

/* Compares result t with the expected tensor; false with the reason in o. */
static bool compare(rx_rt_tensor *t, const pb_tensor *want, int k, outcome *o) {
  char msg[256];
  if (!t) {
    snprintf(msg, sizeof msg, "output %d is not a tensor", k);
    set_why(o, "result", msg);
    return false;
  }
  rx_dtype d = rx_rt_tensor_dtype(t);
  int nd = rx_rt_tensor_ndim(t);
  /* the suite's opset-13 files hold bf16 data as UINT16: compared as the bf16 it is */
  bool bf16_bits = d == RX_DTYPE_BF16 && want->dtype == RX_DTYPE_U16;
  if ((d != want->dtype && !bf16_bits) || nd != want->ndim ||
      memcmp(rx_rt_tensor_shape(t), want->shape, sizeof(int64_t) * (size_t)nd)) {
    snprintf(msg, sizeof msg, "output %d is %s of rank %d, expected %s of rank %d", k,
             rx_rt_dtype_name(d), nd, rx_rt_dtype_name(want->dtype), want->ndim);
    set_why(o, "result", msg);
    return false;
  }
  size_t bytes = rx_rt_tensor_bytes(t);
  void *got = base_malloc(bytes ? bytes : 1);
  rx_status s = rx_rt_tensor_read(t, got, bytes);
  bool ok = !s;
  if (s) set_why(o, "reading the result", rx_status_message(s));
  bool is_float = d == RX_DTYPE_F32 || d == RX_DTYPE_F16 || d == RX_DTYPE_BF16 || d == RX_DTYPE_F64;
  size_t es = rx_rt_dtype_size(d);
  const char *l2 = getenv("RX_ONNX_REL_L2");
  if (ok && is_float && l2) { /* one norm over the whole output */
    double num = 0, den = 0, tol = atof(l2);
    for (size_t i = 0; i < want->count; i++) {
      double g = rxk_load_elem(got, d, i), w = rxk_load_elem(want->data, d, i);
      num += (g - w) * (g - w);
      den += w * w;
    }
    double err = sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
    printf("  output %d: relative L2 error %.2g\n", k, err);
    if (!(err <= tol)) { /* NaN fails too */
      snprintf(msg, sizeof msg, "output %d: relative L2 error %.3g over %.3g", k, err, tol);
      set_why(o, "numbers", msg);
      ok = false;
    }
    free(got);
    return ok;
  }
  for (size_t i = 0; ok && i < want->count; i++) {
    double g = rxk_load_elem(got, d, i), w = rxk_load_elem(want->data, d, i);
    bool same = is_float ? (isnan(w) ? isnan(g) : g == w || fabs(g - w) <= ATOL + RTOL * fabs(w))
                         : !memcmp((const char *)got + i * es, (const char *)want->data + i * es,
                                   es); /* integers bit for bit (u64 beyond 2^53 too) */
    if (!same) {
      snprintf(msg, sizeof msg, "output %d element %zu is %.9g, expected %.9g", k, i, g, w);
      set_why(o, "numbers", msg);
      ok = false;
    }
  }
  rx_status_free(s);
  free(got);
  return ok;
}

/* One data set: the inputs read and passed in order, every output compared; pdt: the dtypes of
 * main's parameters (a UINT16 file, the suite's older form of bf16 data, is passed to a bf16
 * parameter as its bits). */
static void run_set(rx_rt_device *dev, rx_rt_artifact *art, const char *dir, const rx_dtype *pdt,
                    outcome *o) {
  size_t nin = 0, nout = 0;
  char **ins = list_dir(dir, "input_", &nin), **outs = list_dir(dir, "output_", &nout);
  rx_rt_tensor *inputs[MAX_IO] = {0};
  pb_tensor want[MAX_IO] = {0};
  rx_rt_value *result = NULL;
  rx_status s = nin > MAX_IO || nout > MAX_IO || nout == 0
                    ? base_status_make(RX_ERR_UNSUPPORTED, "%zu inputs, %zu outputs", nin, nout)
                    : NULL;
  char path[4096];
  /* input_10.pb sorts before input_2.pb: read them by number */
  for (size_t i = 0; !s && i < nin; i++) {
    pb_tensor in;
    snprintf(path, sizeof path, "%.3000s/input_%zu.pb", dir, i);
    s = read_pb(path, &in);
    if (!s && in.dtype == RX_DTYPE_U16 && pdt[i] == RX_DTYPE_BF16) in.dtype = RX_DTYPE_BF16;
    if (!s) s = rx_rt_tensor_from_host(dev, in.dtype, in.ndim, in.shape, in.data, &inputs[i]);
    pb_free(&in);
  }
  for (size_t k = 0; !s && k < nout; k++) {
    snprintf(path, sizeof path, "%.3000s/output_%zu.pb", dir, k);
    s = read_pb(path, &want[k]);
  }
  if (s) {
    set_why(o, "test data", rx_status_message(s));
  } else if ((s = rx_rt_vm_call(art, "main", inputs, nin, &result))) {
    set_why(o, "run", rx_status_message(s));
  } else if (nout == 1 && rx_rt_value_kind_of(result) != RX_RT_VALUE_TUPLE) {
    compare(rx_rt_value_tensor(result), &want[0], 0, o);
  } else if (rx_rt_value_tuple_size(result) != nout) {
    char msg[96];
    snprintf(msg, sizeof msg, "%zu results, expected %zu", rx_rt_value_tuple_size(result), nout);
    set_why(o, "result", msg);
  } else {
    for (size_t k = 0; k < nout && o->ok; k++)
      compare(rx_rt_value_tensor(rx_rt_value_tuple_item(result, k)), &want[k], (int)k, o);
  }
  rx_status_free(s);
  rx_rt_value_release(result);
  for (size_t i = 0; i < MAX_IO; i++) {
    rx_rt_tensor_release(inputs[i]);
    pb_free(&want[i]);
  }
  free_names(ins, nin);
  free_names(outs, nout);
}

/* Does the model use the training operators' domain? Its name appears in the serialized
 * bytes as it is (opset_import and the nodes' domain fields). */
static bool is_training(const char *bytes, size_t len) {
  static const char dom[] = "ai.onnx.preview.training";
  for (size_t i = 0; i + sizeof dom - 1 <= len; i++)
    if (!memcmp(bytes + i, dom, sizeof dom - 1)) return true;
  return false;
}

/* Imports, compiles and runs one case on every data set. */
static void run_node_case(rx_rt_device *dev, const char *dir, const char *name, outcome *o) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
  char *bytes = NULL;
  size_t len = 0;
  rx_status s = base_read_file(path, &bytes, &len);
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  rx_compile_result r = {0};
  rx_rt_artifact *art = NULL;
  if (!s) s = onnx_import(m, bytes, len, name, NULL, &diag);
  if (!s) s = onnx_add_weights(m, bytes, len, name, NULL);
  rx_dtype pdt[MAX_IO] = {0};
  rx_graph_fn *mainf = s ? NULL : ir_module_graph_fn(m, "main");
  for (int i = 0; mainf && i < mainf->nparams && i < MAX_IO; i++) {
    const rx_sinfo *si = rx_var_sinfo(mainf->params[i]);
    if (si->kind == RX_SINFO_TENSOR) pdt[i] = si->dtype;
  }
  if (s) {
    set_why(o, "import", rx_status_message(s));
  } else {
    rx_compile_options opts = {0};
    opts.cache = rxk_kcache(); /* support_kcache.c */
    s = tgt_target_parse("vulkan-lavapipe", &opts.targets[opts.ntargets++]);
    RX_ASSERT(!s);
    if (!drv_compile(m, &opts, &diag, &r))
      set_why(o, "compile", rx_diag_text(&diag));
    else if ((s = rx_rt_artifact_load_memory(dev, r.artifact, r.artifact_len, name, &art)))
      set_why(o, "load", rx_status_message(s));
  }
  snprintf(path, sizeof path, "%s/%s", dir, name);
  size_t nsets = 0;
  char **sets = list_dir(path, "test_data_set_", &nsets);
  if (o->ok && !nsets) set_why(o, "test data", "no test_data_set_N folder");
  for (size_t i = 0; o->ok && i < nsets; i++) {
    char set[4096];
    snprintf(set, sizeof set, "%s/%.2047s", path, sets[i]);
    run_set(dev, art, set, pdt, o);
  }
  free_names(sets, nsets);
  rx_rt_artifact_release(art);
  drv_compile_result_free(&r);
  base_diag_free(&diag);
  rx_module_free(m);
  rx_status_free(s);
  free(bytes);
}

/* The expected failures: "case reason..." lines ('#' starts a comment). */
typedef struct xfail {
  char **names;
  bool *seen;
  size_t n;
} xfail;

static bool read_xfail(const char *path, xfail *x) {
  memset(x, 0, sizeof *x);
  char *text = NULL;
  size_t len = 0;
  rx_status s = base_read_file(path, &text, &len);
  if (s) {
    fprintf(stderr, "FAIL: the expected-failure list: %s\n", rx_status_message(s));
    rx_status_free(s);
    return false;
  }
  bool ok = true;
  size_t cap = 0, lineno = 0;
  for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    lineno++;
    if (l[0] == '#' || l[0] == '\0') continue;
    char *sp = strpbrk(l, " \t");
    while (sp && (*sp == ' ' || *sp == '\t')) *sp++ = '\0';
    if (!sp || !*sp) { /* every entry carries its reason */
      fprintf(stderr, "FAIL: %s: entry %zu (%s) gives no reason\n", path, lineno, l);
      ok = false;
      continue;
    }
    if (x->n == cap) {
      cap = cap ? 2 * cap : 256;
      x->names = base_realloc(x->names, cap * sizeof *x->names);
    }
    x->names[x->n++] = base_strdup(l);
  }
  x->seen = base_calloc(x->n ? x->n : 1, sizeof *x->seen);
  free(text);
  return ok;
}

static long xfail_find(const xfail *x, const char *name) {
  for (size_t i = 0; i < x->n; i++)
    if (!strcmp(x->names[i], name)) return (long)i;
  return -1;
}

int main(int argc, char **argv) {
  const char *tests = argc > 1 ? argv[1] : "tests";
  const char *dir = getenv("RX_ONNX_NODES");
  if (!dir) dir = "/usr/share/libonnx-testdata/data/node";
  const char *filter = getenv("RX_ONNX_FILTER"), *xout_path = getenv("RX_ONNX_XFAIL_OUT");
  size_t ncases = 0;
  char **cases = list_dir(dir, "test_", &ncases);
  if (!ncases) {
    printf("SKIP: no ONNX node tests in %s (Debian: libonnx-testdata, scripts/deps.sh)\n", dir);
    return 77;
  }
  rx_rt_device *dev = NULL;
  rx_rt_device_options dopts = {.validation = 1};
  rx_status s = rx_rt_device_open("vulkan:0", &dopts, &dev);
  if (s) {
    printf("SKIP: no Vulkan device: %s\n", rx_status_message(s));
    rx_status_free(s);
    free_names(cases, ncases);
    return 77;
  }
  char xpath[2048];
  snprintf(xpath, sizeof xpath, "%s/onnx/node_xfail.txt", tests);
  xfail x;
  int failed = read_xfail(xpath, &x) ? 0 : 1;
  FILE *xout = xout_path ? fopen(xout_path, "w") : NULL;
  int passed = 0, xfailed = 0, training = 0, run = 0;
  for (size_t i = 0; i < ncases; i++) {
    if (filter && !strstr(cases[i], filter)) continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, cases[i]);
    char *bytes = NULL;
    size_t len = 0;
    rx_status rs = base_read_file(path, &bytes, &len);
    bool train = !rs && is_training(bytes, len);
    rx_status_free(rs);
    free(bytes);
    if (train) {
      training++;
      continue;
    }
    run++;
    if (getenv("RX_ONNX_REL_L2")) printf("%s\n", cases[i]);
    outcome o = {.ok = true};
    run_node_case(dev, dir, cases[i], &o);
    long xi = xfail_find(&x, cases[i]);
    if (xi >= 0) x.seen[xi] = true;
    if (o.ok) passed++;
    if (o.ok && xi >= 0) {
      failed++;
      fprintf(stderr, "FAIL: %s passes: remove it from %s\n", cases[i], xpath);
    } else if (!o.ok && xi >= 0) {
      xfailed++;
    } else if (!o.ok) {
      failed++;
      fprintf(stderr, "FAIL: %s: %s\n", cases[i], o.why);
    }
    if (!o.ok && xout) fprintf(xout, "%s %s\n", cases[i], o.why);
  }
  for (size_t i = 0; !filter && i < x.n; i++)
    if (!x.seen[i]) {
      failed++;
      fprintf(stderr, "FAIL: %s lists %s, which is not a case of the suite\n", xpath, x.names[i]);
    }
  const char *last = NULL;
  size_t nmsg = rx_rt_device_validation_messages(dev, &last);
  if (nmsg) {
    failed++;
    fprintf(stderr, "FAIL: %zu validation messages, the last: %s\n", nmsg, last);
  }
  printf("ONNX node tests: %d of %d passed (%.1f%%), %d expected failures, %d training cases "
         "left out; %d unexpected\n",
         passed, run, run ? 100.0 * passed / run : 0.0, xfailed, training, failed);
  if (xout) fclose(xout);
  for (size_t i = 0; i < x.n; i++) free(x.names[i]);
  free(x.names);
  free(x.seen);
  free_names(cases, ncases);
  rx_rt_device_release(dev);
  return failed ? 1 : 0;
}

#else
int main(void) {
  printf("SKIP: relaxc was built without the ONNX frontend\n");
  return 77;
}
#endif
