#include "support_kernels.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t sizes[16] = {1, 7, 33, 128, 1000, 4099};
static size_t nsizes = 6;
static bool sizes_read;
const int64_t rxk_other_size = 33;

static void read_sizes(void) {
  sizes_read = true;
  const char *env = getenv("RX_KERNEL_SIZES");
  if (!env || !*env) return;
  size_t n = 0;
  for (const char *p = env; *p && n < RX_ARRAY_LEN(sizes);) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0) break;
    sizes[n++] = v;
    p = *end == ',' ? end + 1 : end;
  }
  if (n) nsizes = n;
}

size_t rxk_size_count(void) {
  if (!sizes_read) read_sizes();
  return nsizes;
}

int64_t rxk_size_at(size_t i) {
  if (!sizes_read) read_sizes();
  return sizes[i];
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void add_var(rxk_env *e, const rx_expr *v) {
  for (int i = 0; i < e->n; i++)
    if (e->vars[i] == v) return;
  RX_ASSERT(e->n < RXK_MAX_VARS);
  e->vars[e->n] = v;
  e->values[e->n++] = rxk_other_size;
}

void rxk_program_vars(const rx_tensor_fn *f, rxk_env *e) {
  e->n = 0;
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind == RX_PARAM_SCALAR) {
      add_var(e, p->var);
      continue;
    }
    for (int d = 0; d < p->buf->ndim; d++) {
      rx_ptrvec vs = {0};
      sym_expr_collect_vars(p->buf->shape[d], &vs);
      for (size_t k = 0; k < vs.len; k++) add_var(e, vs.data[k]);
      base_ptrvec_free(&vs);
    }
  }
}

/* Whether the facts of f hold at these values: every fact (only), or those over vars[only]
 * alone (only >= 0). A fact that cannot be evaluated counts as holding. */
static bool facts_hold(const rx_tensor_fn *f, const rx_expr *const *vars, const int64_t *values,
                       int n, int only) {
  rx_expr_env ee = {.vars = (const rx_expr **)vars, .values = (int64_t *)values, .n = (size_t)n};
  for (int i = 0; i < f->nfacts; i++) {
    if (only >= 0) {
      rx_ptrvec vs = {0};
      sym_expr_collect_vars(f->facts[i], &vs);
      bool mine = vs.len > 0;
      for (size_t k = 0; k < vs.len; k++) mine = mine && vs.data[k] == vars[only];
      base_ptrvec_free(&vs);
      if (!mine) continue;
    }
    int64_t r = 1;
    if (sym_expr_eval(f->facts[i], &ee, &r) && !r) return false;
  }
  return true;
}

bool rxk_fit_facts(const rx_tensor_fn *f, const rx_expr *const *vars, int64_t *values, int n,
                   int keep) {
  for (int k = 0; k < n; k++) {
    int i = k == n - 1 && keep >= 0 && keep < n ? keep : k;
    if (i == keep && k != n - 1) i = n - 1; /* the kept one's slot goes to the last variable */
    if (facts_hold(f, vars, values, n, i)) continue;
    int64_t v0 = values[i];
    bool found = false;
    for (int64_t d = 1; d <= RXK_FIT_RANGE && !found; d++)
      for (int sgn = -1; sgn <= 1 && !found; sgn += 2) {
        values[i] = v0 + sgn * d;
        found = values[i] >= 1 && facts_hold(f, vars, values, n, i);
      }
    if (!found) values[i] = v0;
  }
  return facts_hold(f, vars, values, n, -1);
}

bool rxk_eval(const rx_expr *x, const rxk_env *e, int64_t *out) {
  rx_expr_env ee = {.vars = e->vars, .values = e->values, .n = (size_t)e->n};
  return sym_expr_eval(x, &ee, out);
}

static size_t elem_bytes(rx_dtype t) { return (size_t)(ir_dtype_bits(t) / 8); }

double rxk_load_elem(const void *p, rx_dtype t, size_t i) { return base_elem_to_f64(p, t, i); }

static void store_random(void *p, rx_dtype t, size_t i) {
  float v = frand();
  switch (t) {
  case RX_DTYPE_F32:
    ((float *)p)[i] = v;
    break;
  case RX_DTYPE_F16:
    ((uint16_t *)p)[i] = base_f32_to_f16(v);
    break;
  case RX_DTYPE_BF16:
    ((uint16_t *)p)[i] = base_f32_to_bf16(v);
    break;
  case RX_DTYPE_I64:
    ((int64_t *)p)[i] = (int64_t)(v * 8);
    break;
  case RX_DTYPE_I32:
    ((int32_t *)p)[i] = (int32_t)(v * 8);
    break;
  case RX_DTYPE_I16:
    ((int16_t *)p)[i] = (int16_t)(v * 8);
    break;
  case RX_DTYPE_I8:
    ((int8_t *)p)[i] = (int8_t)(v * 8);
    break;
  case RX_DTYPE_BOOL:
    ((uint8_t *)p)[i] = v > 0;
    break;
  case RX_DTYPE_F64:
    ((double *)p)[i] = v;
    break;
  case RX_DTYPE_U16:
    ((uint16_t *)p)[i] = (uint16_t)((v + 1) * 8);
    break;
  case RX_DTYPE_U32:
    ((uint32_t *)p)[i] = (uint32_t)((v + 1) * 8);
    break;
  case RX_DTYPE_U64:
    ((uint64_t *)p)[i] = (uint64_t)((v + 1) * 8);
    break;
  default:
    ((uint8_t *)p)[i] = (uint8_t)((v + 1) * 8);
    break;
  }
}

bool rxk_make_buffers(const rx_tensor_fn *f, const rxk_env *e, rxk_buffers *b, char *why,
                      size_t n) {
  memset(b, 0, sizeof *b);
  b->n = f->nparams;
  RX_ASSERT(b->n <= RXK_MAX_PARAMS);
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    rx_interp_arg *a = &b->arg[i];
    if (p->kind == RX_PARAM_SCALAR) {
      if (!rxk_eval(p->var, e, &a->value)) {
        snprintf(why, n, "scalar %s unbound", p->var->name);
        return false;
      }
      continue;
    }
    a->ndim = p->buf->ndim;
    a->dtype = p->buf->dtype;
    size_t count = 1;
    for (int d = 0; d < a->ndim; d++) {
      if (!rxk_eval(p->buf->shape[d], e, &a->shape[d]) || a->shape[d] < 0) {
        snprintf(why, n, "shape of %s not evaluable", p->buf->name);
        return false;
      }
      count *= (size_t)a->shape[d];
    }
    b->bytes[i] = count * elem_bytes(a->dtype);
    a->data = base_calloc(1, b->bytes[i] ? b->bytes[i] : 1);
    if (!p->is_output)
      for (size_t k = 0; k < count; k++) store_random(a->data, a->dtype, k);
  }
  return true;
}

void rxk_copy_buffers(const rxk_buffers *from, rxk_buffers *to) {
  *to = *from;
  for (int i = 0; i < from->n; i++)
    if (from->arg[i].data)
      to->arg[i].data = memcpy(base_malloc(from->bytes[i] ? from->bytes[i] : 1), from->arg[i].data,
                               from->bytes[i]);
}

void rxk_free_buffers(rxk_buffers *b) {
  for (int i = 0; i < b->n; i++) free(b->arg[i].data);
  memset(b, 0, sizeof *b);
}

double rxk_tolerance(rx_dtype t) {
  if (t == RX_DTYPE_F32) return 1e-4;
  if (t == RX_DTYPE_F16 || t == RX_DTYPE_BF16) return 2e-2;
  if (t == RX_DTYPE_F64) return 1e-4; /* as f32: the schedules' order, and GLSL's f32 exp/log */
  return 0;
}

bool rxk_compare_outputs(const rx_tensor_fn *f, const rxk_buffers *got, const rxk_buffers *want,
                         char *msg, size_t n) {
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind != RX_PARAM_BUFFER || !p->is_output) continue;
    rx_dtype t = p->buf->dtype;
    size_t count = got->bytes[i] / elem_bytes(t);
    double maxdiff = 0, maxref = 1;
    size_t worst = 0;
    for (size_t k = 0; k < count; k++) {
      double g = rxk_load_elem(got->arg[i].data, t, k), w = rxk_load_elem(want->arg[i].data, t, k);
      double d = isnan(g) != isnan(w) ? INFINITY : (isnan(g) ? 0 : fabs(g - w));
      if (d > maxdiff) maxdiff = d, worst = k;
      if (fabs(w) > maxref) maxref = fabs(w);
    }
    double tol = rxk_tolerance(t), err = maxdiff / maxref;
    if (!(err <= tol)) {
      snprintf(msg, n, "output %s: normalized error %.3g > %.0e (element %zu: got %g, want %g)",
               p->buf->name, err, tol, worst, rxk_load_elem(got->arg[i].data, t, worst),
               rxk_load_elem(want->arg[i].data, t, worst));
      return false;
    }
  }
  return true;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

void rxk_list_rx_files(const char *dir, rx_ptrvec *out) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d))) {
    size_t n = strlen(de->d_name);
    if (n > 3 && strcmp(de->d_name + n - 3, ".rx") == 0) {
      char *p = base_malloc(strlen(dir) + n + 2);
      sprintf(p, "%s/%s", dir, de->d_name);
      base_ptrvec_push(out, p);
    }
  }
  closedir(d);
  if (out->len > 1) qsort(out->data, out->len, sizeof *out->data, cmp_str);
}

/* Parses, normalizes and verifies text into a new module (*out, NULL on error); returns the
 * diagnostics (heap) or NULL. */
static char *verify_len(const char *name, const char *text, size_t len, rx_module **out) {
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  char *err = NULL;
  if (!ir_parse_module(m, name, text, len, &diag) || !ops_module_normalize(m, &diag) ||
      !ir_module_verify(m, &diag)) {
    err = base_strdup(rx_diag_text(&diag));
    rx_module_free(m);
    m = NULL;
  }
  base_diag_free(&diag);
  *out = m;
  return err;
}

rx_module *rxk_load_module(const char *path, rx_strbuf *msg) {
  char *text;
  size_t len;
  rx_status s = base_read_file(path, &text, &len);
  if (s) {
    base_strbuf_append(msg, rx_status_message(s));
    rx_status_free(s);
    return NULL;
  }
  rx_module *m = NULL;
  char *err = verify_len(path, text, len, &m);
  if (err) base_strbuf_append(msg, err);
  free(err);
  free(text);
  return m;
}

rx_module *rxk_load_test_module(const char *tests, const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", tests, rel);
  rx_strbuf msg = {0};
  rx_module *m = rxk_load_module(path, &msg);
  if (!m) fprintf(stderr, "FAIL: %s does not check:\n%s\n", path, msg.data ? msg.data : "");
  base_strbuf_free(&msg);
  return m;
}

size_t rxk_numel(const rx_interp_arg *a) {
  size_t n = 1;
  for (int d = 0; d < a->ndim; d++) n *= (size_t)a->shape[d];
  return n;
}

char *rxk_verify_text(const char *name, const char *text, rx_module **out) {
  rx_module *m = NULL;
  char *err = verify_len(name, text, strlen(text), &m);
  if (m && out)
    *out = m;
  else
    rx_module_free(m);
  return err;
}

const rx_tensor_fn *rxk_find_fn(rx_module *m, const char *name) {
  for (size_t i = 0; i < m->items.len; i++) {
    const rx_tensor_fn *f = m->items.data[i].fn;
    if (m->items.data[i].kind == RX_ITEM_TENSOR && !strcmp(f->name, name)) return f;
  }
  return NULL;
}
