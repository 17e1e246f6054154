/* Shared by the tests that run artifacts through the runtime's VM (test_e2e, test_onnx): call a
 * function on inputs read from .npy files and compare its single tensor result with a reference
 * .npy by normalized error max|got - want| / max(1, max|want|). Header-only because only these
 * tests link the runtime. */
#ifndef RX_VM_CHECK_H
#define RX_VM_CHECK_H

#include "base/base.h"
#include "base/npy.h"
#include "relaxc/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A device tensor with the contents of a .npy file. */
static inline rx_status rx_vm_tensor_from_npy(rx_rt_device *dev, const char *path,
                                              rx_rt_tensor **out) {
  rx_npy a;
  *out = NULL;
  RX_RETURN_IF_ERROR(base_npy_read(path, &a));
  rx_status s = rx_rt_tensor_from_host(dev, a.dtype, a.ndim, a.shape, a.data, out);
  base_npy_free(&a);
  return s;
}

/* Returns true when fn's result matches want_path within tol; otherwise false with the reason in
 * msg. *out_err gets the normalized error when it could be computed. */
static inline bool rx_vm_check(rx_rt_artifact *art, const char *fn, rx_rt_tensor *const *inputs,
                               size_t n, const char *want_path, double tol, double *out_err,
                               char *msg, size_t msglen) {
  rx_npy want = {0};
  rx_rt_value *result = NULL;
  bool ok = false;
  *out_err = INFINITY;
  rx_status s = base_npy_read(want_path, &want);
  if (!s) s = rx_rt_vm_call(art, fn, inputs, n, &result);
  if (s) {
    snprintf(msg, msglen, "%s", rx_status_message(s));
  } else {
    rx_rt_tensor *t = rx_rt_value_tensor(result);
    size_t count = base_npy_count(&want);
    float *got = base_calloc(count ? count : 1, sizeof *got);
    if (!t) {
      snprintf(msg, msglen, "the result is not a tensor");
    } else if (rx_rt_tensor_ndim(t) != want.ndim ||
               memcmp(rx_rt_tensor_shape(t), want.shape, sizeof(int64_t) * (size_t)want.ndim)) {
      snprintf(msg, msglen, "the result's shape differs from the reference's");
    } else if ((s = rx_rt_tensor_read(t, got, count * sizeof *got))) {
      snprintf(msg, msglen, "reading the result: %s", rx_status_message(s));
    } else {
      const float *w = want.data;
      double maxdiff = 0, maxref = 1;
      for (size_t i = 0; i < count; i++) {
        double d = isnan(got[i]) ? INFINITY : fabs((double)got[i] - w[i]);
        if (d > maxdiff) maxdiff = d;
        if (fabs(w[i]) > maxref) maxref = fabs(w[i]);
      }
      *out_err = maxdiff / maxref;
      ok = *out_err <= tol;
      if (!ok) snprintf(msg, msglen, "normalized error %.3g > %g", *out_err, tol);
    }
    free(got);
  }
  rx_status_free(s);
  rx_rt_value_release(result);
  base_npy_free(&want);
  return ok;
}

#endif
