/* rx_npy_compare GOT.npy WANT.npy [TOL]: compares two .npy files of the same shape by the
 * normalized error max|got - want| / max(1, max|want|) (as tests/unit/vm_check.h), for the lit
 * tests that run models (tests/lit/run). Prints the error; exit 0 when it is <= TOL (default
 * 1e-4), 1 when it is larger or the shapes differ or a file cannot be read, 2 usage. NaN in
 * either file counts as a mismatch. */
#include "base/base.h"
#include "base/npy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fputs("usage: rx_npy_compare GOT.npy WANT.npy [TOL]\n", stderr);
    return 2;
  }
  double tol = 1e-4;
  if (argc == 4) {
    char *end = NULL;
    tol = strtod(argv[3], &end);
    if (!*argv[3] || *end || !(tol >= 0)) {
      fprintf(stderr, "rx_npy_compare: TOL '%s' is not a non-negative number\n", argv[3]);
      return 2;
    }
  }
  rx_npy got, want;
  rx_status s = base_npy_read(argv[1], &got);
  if (s) {
    fprintf(stderr, "rx_npy_compare: %s\n", rx_status_message(s));
    rx_status_free(s);
    return 1;
  }
  if ((s = base_npy_read(argv[2], &want))) {
    fprintf(stderr, "rx_npy_compare: %s\n", rx_status_message(s));
    rx_status_free(s);
    base_npy_free(&got);
    return 1;
  }
  int rc = 0;
  bool same = got.ndim == want.ndim;
  for (int i = 0; same && i < got.ndim; i++) same = got.shape[i] == want.shape[i];
  if (!same) {
    fprintf(stderr, "rx_npy_compare: %s and %s have different shapes\n", argv[1], argv[2]);
    rc = 1;
  } else {
    size_t n = base_npy_count(&got);
    double diff = 0, scale = 1;
    bool nan = false;
    for (size_t i = 0; i < n; i++) {
      double g = elem(&got, i), w = elem(&want, i);
      if (isnan(g) || isnan(w)) nan = true;
      if (fabs(g - w) > diff) diff = fabs(g - w);
      if (fabs(w) > scale) scale = fabs(w);
    }
    double err = diff / scale;
    printf("normalized error %.3g over %zu elements\n", nan ? NAN : err, n);
    if (nan || !(err <= tol)) {
      fprintf(stderr, "rx_npy_compare: %s differs from %s: normalized error %.3g > %g\n", argv[1],
              argv[2], nan ? NAN : err, tol);
      rc = 1;
    }
  }
  base_npy_free(&got);
  base_npy_free(&want);
  return rc;
}
