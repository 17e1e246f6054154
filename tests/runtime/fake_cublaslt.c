/* tests/runtime/fake_cublaslt.c: a fake cuBLASLt on the host, for tests/runtime/cublaslt_test.c.
 * runtime/runtime.cmake builds it as libcublasLt.so.13 in a directory of its own; the test names
 * it in RX_CUBLASLT_LIBRARY, beside the fake CUDA driver (tests/runtime/fake_cuda.c, where device
 * memory is host memory), so that runtime/cuda/cublaslt.c runs against it on every machine.
 *
 * It implements the entry points of LT_FNS (runtime/cuda/cublaslt_api.h) and computes every
 * cublasLtMatmul for real, column-major as the library defines it: D = alpha op(A) op(B) + beta C
 * per batch, in double. It refuses what the real library refuses or what cublaslt.c must never
 * ask (a status other than success, and a line in the trace starting "ERROR:"): a compute type
 * other than CUBLAS_COMPUTE_32F or scale type other than CUDA_R_32F, operand types that differ or
 * are not 16F/16BF/32F, a leading dimension below the rows, op(A) m x k and op(B) k x n that do
 * not agree with C m x n, C and D not the same layout, batch counts that differ, a workspace
 * larger than the preference allowed, a NULL stream (the device's stream is never the NULL one),
 * a handle or descriptor not live. Each matmul appends a line with its types, ops, shapes, leading
 * dimensions, batch and strides, which the test compares. Test-only functions (fake_lt_*) are
 * exported beside the library's. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cuda/cublaslt_api.h"

#define API __attribute__((visibility("default")))

struct lt_context {
  int live;
};
struct lt_desc_st {
  int compute, scale, opa, opb;
};
struct lt_layout_st {
  int type;
  uint64_t rows, cols;
  int64_t ld, stride;
  int32_t batch;
};
struct lt_pref_st {
  uint64_t max_ws;
};

static char trace[64][256];
static size_t ntrace, nerrors, nhandles;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(trace[ntrace % 64], sizeof trace[0], fmt, ap);
  va_end(ap);
  if (!strncmp(trace[ntrace % 64], "ERROR:", 6)) nerrors++;
  ntrace++;
}

static lt_status refuse(const char *what) {
  note("ERROR: %s", what);
  return LT_STATUS_INVALID_VALUE;
}

API size_t fake_lt_trace_count(void) { return ntrace; }
API const char *fake_lt_trace_line(size_t i) { return i < ntrace ? trace[i % 64] : ""; }
API size_t fake_lt_errors(void) { return nerrors; }
API size_t fake_lt_handles(void) { return nhandles; } /* live handles */

API lt_status cublasLtCreate(lt_handle *h) {
  *h = calloc(1, sizeof **h);
  (*h)->live = 1;
  nhandles++;
  return LT_STATUS_SUCCESS;
}
API lt_status cublasLtDestroy(lt_handle h) {
  if (!h || !h->live) return refuse("cublasLtDestroy of a handle not live");
  free(h);
  nhandles--;
  return LT_STATUS_SUCCESS;
}
API lt_status cublasLtMatmulDescCreate(lt_desc *d, int compute, int scale) {
  *d = calloc(1, sizeof **d);
  (*d)->compute = compute;
  (*d)->scale = scale;
  return LT_STATUS_SUCCESS;
}
API lt_status cublasLtMatmulDescDestroy(lt_desc d) {
  free(d);
  return LT_STATUS_SUCCESS;
}
API lt_status cublasLtMatmulDescSetAttribute(lt_desc d, int attr, const void *v, size_t n) {
  if (n != sizeof(int32_t)) return refuse("a descriptor attribute of the wrong size");
  int32_t x;
  memcpy(&x, v, sizeof x);
  if (x != LT_OP_N && x != LT_OP_T) return refuse("an op that is not N or T");
  if (attr == LT_DESC_TRANSA)
    d->opa = x;
  else if (attr == LT_DESC_TRANSB)
    d->opb = x;
  else
    return refuse("an unknown descriptor attribute");
  return LT_STATUS_SUCCESS;
}
API lt_status cublasLtMatrixLayoutCreate(lt_layout *l, int type, uint64_t rows, uint64_t cols,
                                         int64_t ld) {
  if (type != LT_R_16F && type != LT_R_16BF && type != LT_R_32F) return refuse("a layout type");
  if (ld < (int64_t)rows) return refuse("a leading dimension below the rows");
  *l = calloc(1, sizeof **l);
  **l = (struct lt_layout_st){type, rows, cols, ld, 0, 1};
  return LT_STATUS_SUCCESS;
}
API lt_status cublasLtMatrixLayoutDestroy(lt_layout l) {
  free(l);
  return LT_STATUS_SUCCESS;
}
API lt_status cublasLtMatrixLayoutSetAttribute(lt_layout l, int attr, const void *v, size_t n) {
  if (attr == LT_LAYOUT_BATCH_COUNT && n == sizeof(int32_t))
    memcpy(&l->batch, v, n);
  else if (attr == LT_LAYOUT_STRIDED_BATCH_OFFSET && n == sizeof(int64_t))
    memcpy(&l->stride, v, n);
  else
    return refuse("an unknown layout attribute or size");
  return LT_STATUS_SUCCESS;
}
API lt_status cublasLtMatmulPreferenceCreate(lt_pref *p) {
  *p = calloc(1, sizeof **p);
  return LT_STATUS_SUCCESS;
}
API lt_status cublasLtMatmulPreferenceDestroy(lt_pref p) {
  free(p);
  return LT_STATUS_SUCCESS;
}
API lt_status cublasLtMatmulPreferenceSetAttribute(lt_pref p, int attr, const void *v, size_t n) {
  if (attr != LT_PREF_MAX_WORKSPACE_BYTES || n != sizeof(uint64_t))
    return refuse("an unknown preference attribute or size");
  memcpy(&p->max_ws, v, n);
  return LT_STATUS_SUCCESS;
}

/* op(A) m x k, op(B) k x n, C m x n: the shapes agree */
static bool agree(lt_desc d, lt_layout a, lt_layout b, lt_layout c, lt_layout dd) {
  uint64_t am = d->opa ? a->cols : a->rows, ak = d->opa ? a->rows : a->cols;
  uint64_t bk = d->opb ? b->cols : b->rows, bn = d->opb ? b->rows : b->cols;
  return am == c->rows && bn == c->cols && ak == bk && a->type == b->type && b->type == c->type &&
         !memcmp(c, dd, sizeof *c) && a->batch == c->batch && b->batch == c->batch;
}

API lt_status cublasLtMatmulAlgoGetHeuristic(lt_handle h, lt_desc d, lt_layout a, lt_layout b,
                                             lt_layout c, lt_layout dd, lt_pref p, int requested,
                                             lt_heuristic *results, int *returned) {
  if (!h || !h->live) return refuse("a heuristic query on a handle not live");
  if (!agree(d, a, b, c, dd)) return refuse("heuristic: the layouts do not agree");
  if (requested < 1) return refuse("heuristic: no result asked for");
  memset(results, 0, sizeof *results);
  results->workspace_size = p->max_ws < 4096 ? p->max_ws : 4096;
  results->algo.data[0] = 0xa160; /* checked by cublasLtMatmul */
  *returned = 1;
  return LT_STATUS_SUCCESS;
}

static double load(const void *p, int type, int64_t i) {
  if (type == LT_R_32F) return ((const float *)p)[i];
  uint16_t h = ((const uint16_t *)p)[i];
  if (type == LT_R_16BF) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? m / 16777216.0 : (1024 + m) * (double)(1ll << e) / (1ll << 25);
  return h >> 15 ? -v : v; /* no inf/NaN in the tests */
}

static void store(void *p, int type, int64_t i, double v) {
  float f = (float)v;
  if (type == LT_R_32F) {
    ((float *)p)[i] = f;
    return;
  }
  uint32_t u;
  if (type == LT_R_16BF) {
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1); /* to nearest even */
    ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
    return;
  }
  /* f16, normal range only (the tests' values), to nearest even */
  uint16_t s = f < 0 ? 0x8000 : 0;
  double a = f < 0 ? -(double)f : f;
  if (a < 6.103515625e-05) {
    ((uint16_t *)p)[i] = (uint16_t)(s | (uint16_t)(a * 16777216.0 + 0.5));
    return;
  }
  int e = 0;
  while (a >= 2.0) a /= 2, e++;
  while (a < 1.0) a *= 2, e--;
  double mant = (a - 1.0) * 1024.0;
  uint32_t mi = (uint32_t)mant;
  double frac = mant - mi;
  if (frac > 0.5 || (frac == 0.5 && (mi & 1))) mi++;
  uint32_t bits = (uint32_t)(e + 15) * 1024 + mi; /* mi == 1024 carries into the exponent */
  ((uint16_t *)p)[i] = (uint16_t)(s | bits);
}

API lt_status cublasLtMatmul(lt_handle h, lt_desc d, const void *alpha, const void *A, lt_layout la,
                             const void *B, lt_layout lb, const void *beta, const void *C,
                             lt_layout lc, void *D, lt_layout ld, const lt_algo *algo,
                             void *workspace, size_t ws_bytes, void *stream) {
  if (!h || !h->live) return refuse("cublasLtMatmul on a handle not live");
  if (d->compute != LT_COMPUTE_32F || d->scale != LT_R_32F)
    return refuse("cublasLtMatmul: compute type not 32F or scale type not 32F");
  if (!agree(d, la, lb, lc, ld)) return refuse("cublasLtMatmul: the layouts do not agree");
  if (!algo || algo->data[0] != 0xa160) return refuse("cublasLtMatmul: an algorithm not found");
  if (!stream) return refuse("cublasLtMatmul: the NULL stream");
  if (ws_bytes && !workspace) return refuse("cublasLtMatmul: a workspace size without one");
  if (!A || !B || !C || !D || C != D) return refuse("cublasLtMatmul: a NULL operand or C != D");
  float al, be;
  memcpy(&al, alpha, 4);
  memcpy(&be, beta, 4);
  uint64_t m = lc->rows, n = lc->cols, k = d->opa ? la->rows : la->cols;
  note("matmul type %d op %c%c m %llu n %llu k %llu lda %lld ldb %lld ldc %lld batch %d strides "
       "%lld %lld %lld",
       la->type, d->opa ? 'T' : 'N', d->opb ? 'T' : 'N', (unsigned long long)m,
       (unsigned long long)n, (unsigned long long)k, (long long)la->ld, (long long)lb->ld,
       (long long)lc->ld, lc->batch, (long long)la->stride, (long long)lb->stride,
       (long long)lc->stride);
  for (int32_t q = 0; q < lc->batch; q++)
    for (uint64_t j = 0; j < n; j++)
      for (uint64_t i = 0; i < m; i++) {
        double acc = 0;
        for (uint64_t t = 0; t < k; t++) {
          int64_t ia = d->opa ? (int64_t)(i * la->ld + t) : (int64_t)(t * la->ld + i);
          int64_t ib = d->opb ? (int64_t)(t * lb->ld + j) : (int64_t)(j * lb->ld + t);
          acc += load(A, la->type, q * la->stride + ia) * load(B, lb->type, q * lb->stride + ib);
        }
        int64_t ic = q * lc->stride + (int64_t)(j * lc->ld + i);
        double c0 = be != 0 ? load(C, lc->type, ic) : 0;
        store(D, ld->type, ic, al * acc + be * c0);
      }
  return LT_STATUS_SUCCESS;
}
