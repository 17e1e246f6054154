/* relaxc run MODEL.rxm [--device SPEC] [--fn NAME]
 *                      --input NAME=FILE.npy|random:SHAPE|VALUE|shape:DIMS ...
 *                      [--weights DIR] [--output OUT.npy] [--bench N] [--seed S]
 * Loads the artifact for the device (runtime: rx_rt_artifact_load), makes the inputs (a .npy file,
 * or random values of SHAPE: "7x4096", "f16:7x4096"; "random:" alone is a 0-d tensor; the dtype
 * defaults to the parameter's; a Prim parameter's integer or bool VALUE, "n=7"; a Shape
 * parameter's dimensions, "s=shape:2x3"; a parameter bound to one of the artifact's weights needs
 * none; --weights DIR must hold the .npy file of at least one parameter;
 * with --weights DIR, a parameter without an --input is read from DIR/<parameter name>.npy, as
 * `relaxc compile|import MODEL.onnx --weights DIR` writes, a weight's where the file exists (an
 * override: the call then passes every parameter)), calls the function (rx_rt_vm_call) and
 * prints each result tensor's dtype, shape and checksum (the sum and the sum of absolute values
 * of its elements, in double, %.6g), then with --bench N the mean wall-clock time per call over N
 * more calls (rx_rt_vm_call_values: tensors, Prims and Shapes alike). --output writes the first
 * result tensor to OUT.npy, the next to OUT.1.npy, OUT.2.npy, ... An input is checked against its
 * parameter's declared dtype, rank and dimensions (the constant ones, and symbolic ones against
 * other dimensions of the same name) before it is made, and its size against overflow and the
 * host's memory; --output is checked for writability before the artifact is loaded. Exit: 0
 * success; 1 errors of the model or the inputs (unreadable or corrupt artifact, missing function,
 * wrong shape or dtype, violated fact, no kernels for the device, no device, out of memory); 2
 * usage. */
#include "commands.h"

#include "base/npy.h"
#include "relaxc/runtime.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_INPUTS 64 /* --input options */

static int fail(rx_status s) {
  fprintf(stderr, "relaxc: error: %s\n", rx_status_message(s));
  rx_status_free(s);
  return 1;
}

static rx_dtype dtype_named(const char *s, size_t n) {
  for (int t = 1; t < RX_DTYPE_COUNT; t++) {
    const char *name = rx_rt_dtype_name((rx_dtype)t);
    if (strlen(name) == n && !strncmp(name, s, n)) return (rx_dtype)t;
  }
  return RX_DTYPE_UNKNOWN;
}

/* ---- random inputs ---- */
static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void fill_random(void *data, rx_dtype t, size_t count, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < count; i++) {
    uint64_t r = rng_next(&s);
    float f = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0); /* [-1, 1) */
    int64_t k = (int64_t)(r % 16) - 8;                                     /* [-8, 8) */
    switch (t) {
    case RX_DTYPE_F32:
      ((float *)data)[i] = f;
      break;
    case RX_DTYPE_F16:
      ((uint16_t *)data)[i] = base_f32_to_f16(f);
      break;
    case RX_DTYPE_BF16:
      ((uint16_t *)data)[i] = base_f32_to_bf16(f);
      break;
    case RX_DTYPE_I64:
      ((int64_t *)data)[i] = k;
      break;
    case RX_DTYPE_I32:
      ((int32_t *)data)[i] = (int32_t)k;
      break;
    case RX_DTYPE_I16:
      ((int16_t *)data)[i] = (int16_t)k;
      break;
    case RX_DTYPE_I8:
      ((int8_t *)data)[i] = (int8_t)k;
      break;
    case RX_DTYPE_U8:
      ((uint8_t *)data)[i] = (uint8_t)(r % 16);
      break;
    case RX_DTYPE_F64:
      ((double *)data)[i] = f;
      break;
    case RX_DTYPE_U16:
      ((uint16_t *)data)[i] = (uint16_t)(r % 16);
      break;
    case RX_DTYPE_U32:
      ((uint32_t *)data)[i] = (uint32_t)(r % 16);
      break;
    case RX_DTYPE_U64:
      ((uint64_t *)data)[i] = r % 16;
      break;
    case RX_DTYPE_BOOL:
      ((uint8_t *)data)[i] = (uint8_t)(r & 1);
      break;
    default:
      break;
    }
  }
}

/* "D0xD1x..." ("" for no dimensions): each a whole non-negative integer (cli_parse_int). */
static bool parse_dims(const char *spec, int *ndim, int64_t *shape) {
  *ndim = 0;
  if (!*spec) return true;
  for (;;) {
    size_t n = strcspn(spec, "x");
    char dim[32];
    long long v = 0;
    if (n >= sizeof dim || *ndim == RX_RT_MAX_NDIM) return false;
    memcpy(dim, spec, n);
    dim[n] = 0;
    if (!cli_parse_int(dim, 0, INT64_MAX, &v)) return false;
    shape[(*ndim)++] = v;
    if (!spec[n]) return true;
    spec += n + 1;
  }
}

/* "random:[DTYPE:]D0xD1x..." (after "random:"): dtype (default def) and shape. */
static bool parse_random(const char *spec, rx_dtype def, rx_dtype *dt, int *ndim, int64_t *shape) {
  *dt = def == RX_DTYPE_UNKNOWN ? RX_DTYPE_F32 : def;
  const char *colon = strchr(spec, ':');
  if (colon) {
    *dt = dtype_named(spec, (size_t)(colon - spec));
    if (*dt == RX_DTYPE_UNKNOWN) return false;
    spec = colon + 1;
  }
  return parse_dims(spec, ndim, shape);
}

/* ---- parameters that are no tensors: --input NAME=VALUE (a Prim), NAME=shape:D0xD1 (a Shape) */
typedef enum param_kind { PARAM_TENSOR, PARAM_PRIM, PARAM_SHAPE, PARAM_OTHER } param_kind;

static param_kind kind_of(const rx_rt_param_info *info) {
  const char *e = info->expected;
  if (!strncmp(e, "Prim(", 5)) return PARAM_PRIM;
  if (!strncmp(e, "Shape", 5)) return PARAM_SHAPE;
  if (!strncmp(e, "Tuple", 5) || !strncmp(e, "Object", 6) || !strncmp(e, "Func", 4))
    return PARAM_OTHER;
  return PARAM_TENSOR;
}

/* The value of --input NAME=SPEC for the Prim or Shape parameter info of fn. */
static rx_status make_value(const char *fn, const rx_rt_param_info *info, const char *spec,
                            rx_rt_value **out) {
  int64_t dims[RX_RT_MAX_NDIM];
  int ndim = 0;
  if (kind_of(info) == PARAM_SHAPE) {
    if (strncmp(spec, "shape:", 6) || !parse_dims(spec + 6, &ndim, dims))
      return base_status_make(RX_ERR_INVALID,
                              "%s: parameter '%s' is %s: expected shape:D0xD1... (shape:2x3, or "
                              "shape: for no dimensions), got '%s'",
                              fn, info->name, info->expected, spec);
    return rx_rt_value_from_shape(dims, ndim, out);
  }
  const char *t = info->expected + 5; /* "Prim(" */
  rx_dtype dt = dtype_named(t, strcspn(t, ",)"));
  static const struct {
    rx_dtype dt;
    long long lo, hi;
  } ranges[] = {{RX_DTYPE_BOOL, 0, 1},
                {RX_DTYPE_I64, INT64_MIN, INT64_MAX},
                {RX_DTYPE_I32, INT32_MIN, INT32_MAX},
                {RX_DTYPE_I16, INT16_MIN, INT16_MAX},
                {RX_DTYPE_I8, INT8_MIN, INT8_MAX},
                {RX_DTYPE_U8, 0, UINT8_MAX},
                {RX_DTYPE_U16, 0, UINT16_MAX},
                {RX_DTYPE_U32, 0, UINT32_MAX},
                {RX_DTYPE_U64, 0, INT64_MAX}};
  size_t r = 0;
  while (r < sizeof ranges / sizeof *ranges && ranges[r].dt != dt) r++;
  if (r == sizeof ranges / sizeof *ranges)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "%s: parameter '%s' is %s: relaxc run passes integer and bool scalars "
                            "only",
                            fn, info->name, info->expected);
  long long v = 0;
  bool ok = dt == RX_DTYPE_BOOL && (!strcmp(spec, "true") || !strcmp(spec, "false"));
  if (ok) v = !strcmp(spec, "true");
  if (!ok) ok = cli_parse_int(spec, ranges[r].lo, ranges[r].hi, &v);
  if (!ok)
    return base_status_make(RX_ERR_INVALID,
                            "%s: parameter '%s' is %s: expected its value (--input %s=%s), an "
                            "integer from %lld to %lld, got '%s'",
                            fn, info->name, info->expected, info->name,
                            dt == RX_DTYPE_BOOL ? "true" : "7", ranges[r].lo, ranges[r].hi, spec);
  return rx_rt_value_from_prim(dt, v, out);
}

/* ---- results ---- */
static void type_text(char *buf, size_t size, rx_dtype t, int ndim, const int64_t *shape) {
  size_t n = (size_t)snprintf(buf, size, "%s[", rx_rt_dtype_name(t));
  for (int i = 0; i < ndim && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (n < size) snprintf(buf + n, size - n, "]");
}

/* "out.npy" -> "out.K.npy" (K > 0). */
static char *output_path(const char *base, int k) {
  size_t n = strlen(base) + 32;
  char *p = base_malloc(n); /* aborts when out of memory */
  if (k == 0) {
    snprintf(p, n, "%s", base);
    return p;
  }
  size_t len = strlen(base);
  if (len > 4 && !strcmp(base + len - 4, ".npy"))
    snprintf(p, n, "%.*s.%d.npy", (int)(len - 4), base, k);
  else
    snprintf(p, n, "%s.%d", base, k);
  return p;
}

typedef struct printer {
  const char *output;
  int ntensors;
  rx_status err;
} printer;

static void print_value(printer *pr, rx_rt_value *v, const char *label) {
  if (pr->err) return;
  char ty[512];
  switch (rx_rt_value_kind_of(v)) {
  case RX_RT_VALUE_TENSOR: {
    rx_rt_tensor *t = rx_rt_value_tensor(v);
    rx_dtype dt = rx_rt_tensor_dtype(t);
    int ndim = rx_rt_tensor_ndim(t);
    const int64_t *shape = rx_rt_tensor_shape(t);
    size_t bytes = rx_rt_tensor_bytes(t), es = rx_rt_dtype_size(dt), count = es ? bytes / es : 0;
    type_text(ty, sizeof ty, dt, ndim, shape);
    void *data = malloc(bytes ? bytes : 1);
    if (!data) {
      pr->err = base_status_make(RX_ERR_OUT_OF_MEMORY, "%s: out of host memory: %zu bytes for %s",
                                 label, bytes, ty);
      return;
    }
    if ((pr->err = rx_rt_tensor_read(t, data, bytes))) {
      free(data);
      return;
    }
    double sum = 0, abs_sum = 0;
    for (size_t i = 0; i < count; i++) {
      double x = base_elem_to_f64(data, dt, i);
      sum += x;
      abs_sum += x < 0 ? -x : x;
    }
    printf("%s: %s sum %.6g abs_sum %.6g\n", label, ty, sum, abs_sum);
    if (pr->output) {
      rx_npy a = {dt, ndim, {0}, data, bytes};
      memcpy(a.shape, shape, (size_t)ndim * sizeof *shape);
      char *path = output_path(pr->output, pr->ntensors);
      pr->err = base_npy_write(path, &a);
      free(path);
    }
    pr->ntensors++;
    free(data);
    break;
  }
  case RX_RT_VALUE_TUPLE: {
    size_t n = rx_rt_value_tuple_size(v);
    if (!n) printf("%s: ()\n", label);
    for (size_t i = 0; i < n; i++) {
      char sub[256];
      snprintf(sub, sizeof sub, "%s.%zu", label, i);
      print_value(pr, rx_rt_value_tuple_item(v, i), sub);
    }
    break;
  }
  case RX_RT_VALUE_SHAPE: {
    const int64_t *dims = NULL;
    int n = rx_rt_value_shape(v, &dims);
    size_t len = (size_t)snprintf(ty, sizeof ty, "shape(");
    for (int i = 0; i < n && len < sizeof ty; i++)
      len +=
          (size_t)snprintf(ty + len, sizeof ty - len, "%s%lld", i ? ", " : "", (long long)dims[i]);
    printf("%s: %s)\n", label, ty);
    break;
  }
  case RX_RT_VALUE_PRIM: {
    rx_dtype dt = RX_DTYPE_UNKNOWN;
    int64_t x = rx_rt_value_prim(v, &dt);
    printf("%s: %s %lld\n", label, rx_rt_dtype_name(dt), (long long)x);
    break;
  }
  default:
    printf("%s: (storage)\n", label);
    break;
  }
}

/* ---- inputs checked against their parameters before they are made ---- */
#define MAX_BOUND 256 /* symbolic dimensions bound from the inputs of one call */

typedef struct bindings { /* symbolic dimensions seen so far: "n" = 7 */
  int n;
  char names[MAX_BOUND][64];
  int64_t values[MAX_BOUND];
} bindings;

/* The next top-level dimension of the struct info text "f32[n, 4096]" at *p, trimmed into dim. */
static bool next_dim(const char **p, char *dim, size_t size) {
  const char *q = *p;
  while (*q == ' ') q++;
  if (!*q || *q == ']') return false;
  int depth = 0;
  size_t n = 0;
  for (; *q && (depth || (*q != ',' && *q != ']')); q++) {
    depth += (*q == '(' || *q == '[') - (*q == ')' || *q == ']');
    if (n + 1 < size) dim[n++] = *q;
  }
  while (n && dim[n - 1] == ' ') n--;
  dim[n] = 0;
  *p = *q == ',' ? q + 1 : q;
  return true;
}

static bool is_ident(const char *s) {
  if (!isalpha((unsigned char)*s) && *s != '_') return false;
  while (*++s)
    if (!isalnum((unsigned char)*s) && *s != '_') return false;
  return true;
}

/* Does (dt, ndim, shape) fit parameter info of fn? The dtype, the rank, each constant dimension,
 * and each dimension named by a bare symbol against the value it had before (then bound in b).
 * Dimensions given by expressions are left to the VM. Same messages as the VM's checks. */
static rx_status check_param(const char *fn, const rx_rt_param_info *info, bindings *b, rx_dtype dt,
                             int ndim, const int64_t *shape) {
  char detail[256] = "";
  if (info->dtype != RX_DTYPE_UNKNOWN && info->dtype != dt) {
    snprintf(detail, sizeof detail, "dtype %s, expected %s", rx_rt_dtype_name(dt),
             rx_rt_dtype_name(info->dtype));
  } else if (info->ndim >= 0 && info->ndim != ndim) {
    snprintf(detail, sizeof detail, "rank %d, expected %d", ndim, info->ndim);
  } else if (info->ndim >= 0 && strchr(info->expected, '[')) {
    const char *p = strchr(info->expected, '[') + 1;
    char dim[128];
    int nb = b->n;
    for (int i = 0; i < ndim && !detail[0] && next_dim(&p, dim, sizeof dim); i++) {
      char *end = NULL;
      long long c = strtoll(dim, &end, 10);
      if (end != dim && !*end) {
        if (c != shape[i])
          snprintf(detail, sizeof detail, "dimension %d is %lld, expected %lld", i,
                   (long long)shape[i], c);
        continue;
      }
      if (!is_ident(dim) || strlen(dim) >= sizeof b->names[0]) continue;
      int k = 0;
      while (k < b->n && strcmp(b->names[k], dim)) k++;
      if (k < b->n && b->values[k] != shape[i])
        snprintf(detail, sizeof detail, "dimension %d is %lld, but %s = %lld", i,
                 (long long)shape[i], dim, (long long)b->values[k]);
      else if (k == b->n && b->n < MAX_BOUND) {
        memcpy(b->names[b->n], dim, strlen(dim) + 1); /* fits: checked above */
        b->values[b->n++] = shape[i];
      }
    }
    if (detail[0]) b->n = nb; /* nothing bound from a rejected input */
  }
  if (!detail[0]) return NULL;
  char got[512];
  type_text(got, sizeof got, dt, ndim, shape);
  return base_status_make(RX_ERR_INVALID, "%s: parameter '%s': expected %s, got %s (%s)", fn,
                          info->name, info->expected, got, detail);
}

/* The size of random:SHAPE for parameter info: the element count and bytes, checked against
 * overflow and the host's memory. */
static rx_status random_size(const rx_rt_param_info *info, rx_dtype dt, int ndim,
                             const int64_t *shape, uint64_t *out_count, uint64_t *out_bytes) {
  char ty[512];
  type_text(ty, sizeof ty, dt, ndim, shape);
  int64_t count = 0, bytes = 0; /* shapes from parse_random are not negative */
  bool elems = base_shape_count(ndim, shape, 1, &count) == RX_COUNT_OK;
  if (!elems || base_shape_count(ndim, shape, rx_rt_dtype_size(dt), &bytes) != RX_COUNT_OK)
    return base_status_make(RX_ERR_INVALID, "parameter '%s': the %s of %s overflows", info->name,
                            elems ? "byte size" : "element count", ty);
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if ((uint64_t)bytes > SIZE_MAX / 2 ||
      (pages > 0 && page > 0 && (uint64_t)bytes > (uint64_t)pages * (uint64_t)page))
    return base_status_make(RX_ERR_OUT_OF_MEMORY,
                            "parameter '%s': %s needs %llu bytes, more than this machine's memory "
                            "(%llu bytes)",
                            info->name, ty, (unsigned long long)bytes,
                            (unsigned long long)pages * (unsigned long long)page);
  *out_count = (uint64_t)count;
  *out_bytes = (uint64_t)bytes;
  return NULL;
}

/* random:SHAPE for parameter info (checked by check_param): sized, then made. */
static rx_status make_random(rx_rt_device *d, const rx_rt_param_info *info, rx_dtype dt, int ndim,
                             const int64_t *shape, uint64_t seed, rx_rt_tensor **out) {
  char ty[512];
  type_text(ty, sizeof ty, dt, ndim, shape);
  uint64_t count = 0, bytes = 0;
  rx_status s = random_size(info, dt, ndim, shape, &count, &bytes);
  if (s) return s;
  void *data = malloc(bytes ? (size_t)bytes : 1);
  if (!data)
    return base_status_make(RX_ERR_OUT_OF_MEMORY,
                            "parameter '%s': out of host memory: %llu bytes for %s", info->name,
                            (unsigned long long)bytes, ty);
  fill_random(data, dt, (size_t)count, seed);
  s = rx_rt_tensor_from_host(d, dt, ndim, shape, data, out);
  free(data);
  return s;
}

/* Each random:SHAPE input of fn checked against its parameter in artifact a (loaded without a
 * device) before a device is opened; what this cannot check (a parameter or function that does
 * not exist) is left to the call, which names it. */
static rx_status check_random_inputs(const rx_rt_artifact *a, const char *fn, int nin,
                                     const char **names, const char **specs) {
  size_t fi = 0, nfn = rx_rt_artifact_function_count(a);
  while (fi < nfn && strcmp(rx_rt_artifact_function_name(a, fi), fn)) fi++;
  if (fi == nfn) return NULL;
  bindings bound = {0};
  for (int k = 0; k < nin; k++) {
    if (strncmp(specs[k], "random:", 7)) continue;
    size_t nlen = (size_t)(specs[k] - 1 - names[k]),
           np = rx_rt_artifact_function_param_count(a, fi);
    rx_rt_param_info info;
    size_t pi = 0;
    for (; pi < np; pi++) {
      rx_rt_artifact_function_param(a, fi, pi, &info);
      if (strlen(info.name) == nlen && !strncmp(info.name, names[k], nlen)) break;
    }
    if (pi == np) continue;
    rx_dtype dt;
    int ndim;
    int64_t shape[RX_RT_MAX_NDIM];
    uint64_t count, bytes;
    if (!parse_random(specs[k] + 7, info.dtype, &dt, &ndim, shape)) continue;
    rx_status s = check_param(fn, &info, &bound, dt, ndim, shape);
    if (s) return s;
    if ((s = random_size(&info, dt, ndim, shape, &count, &bytes)))
      return base_status_annotate(s, "--input %s", names[k]);
  }
  return NULL;
}

/* --weights DIR: parameter pi of fn, which no --input gives, from DIR/<name>.npy. */
static rx_status load_weight(rx_rt_device *d, const char *dir, const char *fn, size_t pi,
                             const rx_rt_param_info *info, bindings *b, rx_rt_tensor **out) {
  if (strchr(info->name, '/') || !info->name[0] || info->name[0] == '.')
    return base_status_make(RX_ERR_INVALID,
                            "%s: no --input for parameter %zu '%s' (%s), and its name is no file "
                            "name for --weights",
                            fn, pi, info->name, info->expected);
  rx_strbuf path = {0};
  base_strbuf_printf(&path, "%s/%s.npy", dir, info->name);
  rx_status s = NULL;
  FILE *f = fopen(path.data, "rb");
  if (!f) {
    s = base_status_make(RX_ERR_INVALID,
                         "%s: no --input for parameter %zu '%s' (%s), and no weight file '%s'", fn,
                         pi, info->name, info->expected, path.data);
  } else {
    fclose(f);
    rx_npy a;
    if (!(s = base_npy_read(path.data, &a))) {
      s = check_param(fn, info, b, a.dtype, a.ndim, a.shape);
      if (!s) s = rx_rt_tensor_from_host(d, a.dtype, a.ndim, a.shape, a.data, out);
      base_npy_free(&a);
    }
    if (s)
      s = base_status_annotate(s, "--weights: parameter '%s' from '%s'", info->name, path.data);
  }
  base_strbuf_free(&path);
  return s;
}

/* Does DIR/<name>.npy exist (--weights DIR overrides a weight the artifact holds with it)? */
static bool has_weight_file(const char *dir, const char *name) {
  if (strchr(name, '/') || !name[0] || name[0] == '.') return false;
  rx_strbuf path = {0};
  base_strbuf_printf(&path, "%s/%s.npy", dir, name);
  bool ok = access(path.data, F_OK) == 0;
  base_strbuf_free(&path);
  return ok;
}

/* t as a value (inputs[] holds values): the value holds its own reference, t's is released. */
static rx_status wrap(rx_rt_tensor *t, rx_rt_value **out) {
  rx_status s = rx_rt_value_from_tensor(t, out);
  rx_rt_tensor_release(t);
  return s;
}

/* The call's arguments into out (borrowed from inputs, indexed by parameter), their count
 * returned: the parameters that are not bound to weights, which the artifact then supplies; or,
 * when an --input or --weights file overrides a weight, every parameter, the artifact's weights
 * put into inputs[] in the places of the others first. */
static rx_status call_values(const rx_rt_artifact *art, size_t fi, rx_rt_value **inputs,
                             size_t nparams, rx_rt_value **out, size_t *out_n) {
  bool override = false;
  for (size_t pi = 0; pi < nparams; pi++)
    override = override || (inputs[pi] && rx_rt_artifact_param_weight(art, fi, pi, NULL));
  size_t n = 0;
  for (size_t pi = 0; pi < nparams; pi++) {
    size_t wi;
    rx_rt_weight_info info;
    if (override && !inputs[pi] && rx_rt_artifact_param_weight(art, fi, pi, &wi) &&
        rx_rt_artifact_weight(art, wi, &info))
      RX_RETURN_IF_ERROR(rx_rt_value_from_tensor(info.tensor, &inputs[pi]));
    if (inputs[pi]) out[n++] = inputs[pi];
  }
  *out_n = n;
  return NULL;
}

#define LISTED_PARAMS 8 /* parameters named in a message: an LLM's function has hundreds */

/* "parameters: x: f32[n, 4], k: Prim(i64); and 294 bound to weights" for function fi: those the
 * call needs (not bound to weights) with their struct info, the first LISTED_PARAMS of them, then
 * how many more and how many the artifact's weights give. */
static void param_list(const rx_rt_artifact *art, size_t fi, rx_strbuf *out) {
  size_t np = rx_rt_artifact_function_param_count(art, fi), listed = 0, more = 0, nw = 0;
  for (size_t pi = 0; pi < np; pi++) {
    rx_rt_param_info info;
    rx_rt_artifact_function_param(art, fi, pi, &info);
    if (rx_rt_artifact_param_weight(art, fi, pi, NULL))
      nw++;
    else if (listed == LISTED_PARAMS)
      more++;
    else
      base_strbuf_printf(out, "%s%s: %s", listed++ ? ", " : "parameters: ", info.name,
                         info.expected);
  }
  if (more) base_strbuf_printf(out, ", and %zu more", more);
  if (nw) base_strbuf_printf(out, "%s%zu bound to weights", listed ? "; and " : "", nw);
}

/* Each --input NAME=SPEC (in_names[k] "NAME=SPEC", in_specs[k] its SPEC) to its parameter of
 * function fi (fn): a .npy file or random:SHAPE (seeded per parameter), checked against the
 * parameter's struct info with the symbolic values bound so far; inputs[] is indexed by
 * parameter. */
static rx_status bind_inputs(rx_rt_device *d, rx_rt_artifact *art, size_t fi, const char *fn,
                             int nin, const char *const *in_names, const char *const *in_specs,
                             long long seed, bindings *bound, rx_rt_value **inputs) {
  size_t nparams = rx_rt_artifact_function_param_count(art, fi);
  rx_status s = NULL;
  long long v = 0;
  for (int k = 0; k < nin && !s; k++) {
    size_t nlen = (size_t)(in_specs[k] - 1 - in_names[k]), pi = 0;
    rx_rt_param_info info;
    for (; pi < nparams; pi++) {
      rx_rt_artifact_function_param(art, fi, pi, &info);
      if (strlen(info.name) == nlen && !strncmp(info.name, in_names[k], nlen)) break;
    }
    if (pi == nparams) {
      rx_strbuf names = {0};
      param_list(art, fi, &names);
      s = base_status_make(RX_ERR_INVALID, "--input %.*s: %s has no parameter '%.*s' (%s)",
                           (int)nlen, in_names[k], fn, (int)nlen, in_names[k],
                           names.data ? names.data : "no parameters");
      base_strbuf_free(&names);
      break;
    }
    if (inputs[pi]) {
      s = base_status_make(RX_ERR_INVALID, "--input %s: parameter '%s' is given twice", in_names[k],
                           info.name);
      break;
    }
    const char *spec = in_specs[k];
    param_kind kind = kind_of(&info);
    rx_rt_tensor *t = NULL;
    if (kind == PARAM_PRIM || kind == PARAM_SHAPE) {
      if ((s = make_value(fn, &info, spec, &inputs[pi]))) break; /* names fn and param */
    } else if (kind == PARAM_OTHER) {
      s = base_status_make(RX_ERR_UNSUPPORTED,
                           "%s: parameter '%s' is %s: relaxc run cannot pass it", fn, info.name,
                           info.expected);
      break;
    } else if (!strncmp(spec, "shape:", 6) || cli_parse_int(spec, INT64_MIN, INT64_MAX, &v)) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: parameter '%s' is a tensor (%s): expected FILE.npy or "
                           "random:SHAPE, got '%s'",
                           fn, info.name, info.expected, spec);
      break;
    } else if (!strncmp(spec, "random:", 7)) {
      rx_dtype dt;
      int ndim;
      int64_t shape[RX_RT_MAX_NDIM];
      bool parsed = parse_random(spec + 7, info.dtype, &dt, &ndim, shape);
      assert(parsed); /* checked with the options */
      (void)parsed;
      uint64_t rseed = (uint64_t)seed * 1000003u + (uint64_t)pi * 7919u + 1u;
      if ((s = check_param(fn, &info, bound, dt, ndim, shape))) break; /* names fn and param */
      s = make_random(d, &info, dt, ndim, shape, rseed, &t);
    } else {
      rx_npy a;
      if (!(s = base_npy_read(spec, &a))) {
        rx_status bad = check_param(fn, &info, bound, a.dtype, a.ndim, a.shape);
        if (!bad) s = rx_rt_tensor_from_host(d, a.dtype, a.ndim, a.shape, a.data, &t);
        base_npy_free(&a);
        if (bad) {
          s = bad; /* names fn and param: not annotated */
          break;
        }
      }
    }
    if (!s && t) s = wrap(t, &inputs[pi]);
    if (s) s = base_status_annotate(s, "--input %s", in_names[k]);
  }
  return s;
}

/* Each parameter of fi that no --input gives: from --weights DIR (a parameter the artifact does
 * not bind, or one whose DIR/<name>.npy overrides its weight), or the artifact's weight, or an
 * error naming the parameter, its struct info and how to give it. */
static rx_status fill_missing(rx_rt_device *d, rx_rt_artifact *art, size_t fi, const char *fn,
                              const char *wdir, bindings *bound, rx_rt_value **inputs) {
  size_t nparams = rx_rt_artifact_function_param_count(art, fi);
  rx_status s = NULL;
  for (size_t pi = 0; pi < nparams && !s; pi++) {
    if (inputs[pi]) continue;
    rx_rt_param_info info;
    rx_rt_artifact_function_param(art, fi, pi, &info);
    bool weight = rx_rt_artifact_param_weight(art, fi, pi, NULL); /* the artifact holds it */
    param_kind kind = kind_of(&info);
    rx_rt_tensor *t = NULL;
    if (wdir && kind == PARAM_TENSOR && (!weight || has_weight_file(wdir, info.name))) {
      if (!(s = load_weight(d, wdir, fn, pi, &info, bound, &t))) s = wrap(t, &inputs[pi]);
    } else if (!weight) {
      s = base_status_make(RX_ERR_INVALID, "%s: no --input for parameter %zu '%s' (%s)%s%s%s", fn,
                           pi, info.name, info.expected,
                           kind == PARAM_PRIM    ? ": give its value, --input "
                           : kind == PARAM_SHAPE ? ": give it as --input "
                                                 : "",
                           kind == PARAM_PRIM || kind == PARAM_SHAPE ? info.name : "",
                           kind == PARAM_PRIM    ? "=7"
                           : kind == PARAM_SHAPE ? "=shape:2x3"
                                                 : "");
    }
  }
  return s;
}

/* --weights DIR must be a directory holding DIR/<name>.npy of at least one tensor parameter of
 * fn (a mistyped DIR was ignored: the artifact's weights were used, or "no --input" said
 * nothing of DIR). Checked on the artifact loaded without a device; a missing function is left
 * to the call, which names it. */
static rx_status check_weights_dir(const rx_rt_artifact *a, const char *fn, const char *wdir) {
  struct stat st;
  if (stat(wdir, &st) != 0)
    return base_status_make(RX_ERR_NOT_FOUND, "--weights %s: %s", wdir, strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return base_status_make(RX_ERR_INVALID, "--weights %s: not a directory", wdir);
  size_t fi = 0, nfn = rx_rt_artifact_function_count(a);
  while (fi < nfn && strcmp(rx_rt_artifact_function_name(a, fi), fn)) fi++;
  if (fi == nfn) return NULL;
  size_t np = rx_rt_artifact_function_param_count(a, fi), ntensors = 0;
  rx_strbuf names = {0};
  for (size_t pi = 0; pi < np; pi++) {
    rx_rt_param_info info;
    rx_rt_artifact_function_param(a, fi, pi, &info);
    if (kind_of(&info) != PARAM_TENSOR) continue;
    if (has_weight_file(wdir, info.name)) {
      base_strbuf_free(&names);
      return NULL;
    }
    if (ntensors++ < 4) base_strbuf_printf(&names, "%s%s.npy", ntensors > 1 ? ", " : "", info.name);
  }
  rx_status s =
      base_status_make(RX_ERR_INVALID,
                       "--weights %s: the directory holds no .npy file of a parameter of "
                       "%s (expected files such as %s%s, as relaxc compile|import "
                       "--weights DIR writes them)",
                       wdir, fn, names.data ? names.data : "none", ntensors > 4 ? ", ..." : "");
  base_strbuf_free(&names);
  return s;
}

/* --bench N: the call repeated N times after one more, synchronized; the mean wall-clock time. */
static rx_status bench_calls(rx_rt_device *d, rx_rt_artifact *art, const char *fn,
                             rx_rt_value *const *args, size_t nargs, int iters, double *out_ms) {
  struct timespec t0, t1;
  for (int i = 0; i <= iters; i++) {
    if (i == 1) {
      RX_RETURN_IF_ERROR(rx_rt_device_synchronize(d));
      clock_gettime(CLOCK_MONOTONIC, &t0);
    }
    rx_rt_value *r = NULL;
    RX_RETURN_IF_ERROR(rx_rt_vm_call_values(art, fn, args, nargs, &r));
    rx_rt_value_release(r);
  }
  RX_RETURN_IF_ERROR(rx_rt_device_synchronize(d));
  clock_gettime(CLOCK_MONOTONIC, &t1);
  *out_ms =
      ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6) / iters;
  return NULL;
}

int cli_cmd_run(const rx_cli_command *cmd, int argc, char **argv) {
  const char *model = NULL, *device = NULL, *fn = "main", *output = NULL, *wdir = NULL;
  const char *in_names[MAX_INPUTS], *in_specs[MAX_INPUTS];
  int nin = 0;
  long long bench = 0, seed = 0;
  rx_cli_args it = cli_begin(cmd, argc, argv);
  while (cli_next(&it)) {
    const char *f = it.flag, *v = it.value;
    if (!f) {
      if (model) return cli_usage_error(cmd, "run takes one MODEL.rxm, got '%s' too", v);
      model = v;
    } else if (!strcmp(f, "--device")) {
      device = v;
    } else if (!strcmp(f, "--fn")) {
      fn = v;
    } else if (!strcmp(f, "--output")) {
      output = v;
    } else if (!strcmp(f, "--weights")) {
      wdir = v;
    } else if (!strcmp(f, "--bench")) {
      int rc = cli_int_option(&it, 1, 1000000, &bench);
      if (rc) return rc;
    } else if (!strcmp(f, "--seed")) {
      int rc = cli_int_option(&it, 0, INT64_MAX, &seed);
      if (rc) return rc;
    } else if (!strcmp(f, "--input")) {
      const char *eq = strchr(v, '=');
      if (!eq || eq == v)
        return cli_usage_error(cmd,
                               "--input takes NAME=FILE.npy, NAME=random:SHAPE, NAME=VALUE (a "
                               "Prim) or NAME=shape:D0xD1 (a Shape), got '%s'",
                               v);
      if (nin == MAX_INPUTS) return cli_usage_error(cmd, "more than %d inputs", MAX_INPUTS);
      in_names[nin] = v;
      in_specs[nin++] = eq + 1;
    } else {
      return cli_unhandled(&it);
    }
  }
  if (it.status >= 0) return it.status;
  if (!model) return cli_usage_error(cmd, "%s", "run needs a MODEL.rxm");
  /* random:SHAPE is checked now, a usage error before any work */
  for (int k = 0; k < nin; k++) {
    rx_dtype dt;
    int ndim;
    int64_t shape[RX_RT_MAX_NDIM];
    if (!strncmp(in_specs[k], "random:", 7) &&
        !parse_random(in_specs[k] + 7, RX_DTYPE_UNKNOWN, &dt, &ndim, shape))
      return cli_usage_error(cmd, "--input: '%s' is not random:[DTYPE:]SHAPE (SHAPE like 7x4096)",
                             in_specs[k]);
  }
  if (!cli_not_dir(model)) return 1;
  if (output && !cli_can_write(output)) return 1; /* before any work */

  /* the artifact's own errors (truncated, corrupted, wrong version) come first, device or not */
  rx_rt_artifact *art = NULL;
  rx_status s = rx_rt_artifact_load(NULL, model, &art);
  if (!s) s = check_random_inputs(art, fn, nin, in_names, in_specs);
  if (!s && wdir) s = check_weights_dir(art, fn, wdir);
  rx_rt_artifact_release(art);
  art = NULL;
  if (s) return fail(s);
  rx_rt_device *d = NULL;
  rx_rt_device_options opts = {NULL, -1, false};
  if ((s = rx_rt_device_open(device, &opts, &d))) return fail(s);
  int rc = 0;
  rx_rt_value **inputs = NULL; /* one per parameter */
  rx_rt_value **args = NULL;   /* the call's (call_values) */
  size_t nparams = 0, nargs = 0;
  rx_rt_value *result = NULL;
  if ((s = rx_rt_artifact_load(d, model, &art))) goto done;
  size_t fi = 0, nfn = rx_rt_artifact_function_count(art);
  while (fi < nfn && strcmp(rx_rt_artifact_function_name(art, fi), fn)) fi++;
  if (fi == nfn) { /* the VM's message lists the functions */
    s = rx_rt_vm_call(art, fn, NULL, 0, &result);
    goto done;
  }
  nparams = rx_rt_artifact_function_param_count(art, fi);
  inputs = base_calloc(nparams ? nparams : 1, sizeof *inputs); /* aborts when out of memory */
  bindings bound = {0};
  s = bind_inputs(d, art, fi, fn, nin, in_names, in_specs, seed, &bound, inputs);
  if (!s) s = fill_missing(d, art, fi, fn, wdir, &bound, inputs);
  if (s) goto done;
  args = base_calloc(nparams ? nparams : 1, sizeof *args);
  if ((s = call_values(art, fi, inputs, nparams, args, &nargs))) goto done;
  if ((s = rx_rt_vm_call_values(art, fn, args, nargs, &result))) goto done;
  printer pr = {output, 0, NULL};
  print_value(&pr, result, "result");
  if ((s = pr.err)) goto done;
  if (bench) {
    double ms = 0;
    rx_rt_value_release(result);
    result = NULL;
    if ((s = bench_calls(d, art, fn, args, nargs, (int)bench, &ms))) goto done;
    printf("bench: %lld calls, %.4f ms per call (%s)\n", bench, ms, rx_rt_device_get_info(d)->name);
  }
done:
  if (s) rc = fail(s);
  rx_rt_value_release(result);
  for (size_t j = 0; inputs && j < nparams; j++) rx_rt_value_release(inputs[j]);
  free(inputs);
  free(args);
  rx_rt_artifact_release(art);
  if (d) {
    const char *last = NULL;
    size_t nv = rx_rt_device_validation_messages(d, &last);
    if (nv) {
      fprintf(stderr, "relaxc: error: %zu Vulkan validation messages, the last: %s\n", nv, last);
      rc = 1;
    }
  }
  rx_rt_device_release(d);
  return rc;
}
