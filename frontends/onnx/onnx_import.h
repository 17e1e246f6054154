/* frontends/onnx/onnx_import.h: the ONNX importer (frontends/onnx/import.c), built when
 * RX_HAVE_ONNX is defined (frontends/onnx/onnx.cmake). Internal header of relaxc_core.
 *
 * An ONNX ModelProto becomes one graph function `main` in the module:
 * - parameters: the graph inputs (that are not initializers) in order, then the weights: the
 *   float initializers and large float Constant tensors, in that order (rx_onnx_weights gives
 *   their data in the same order). Weights are passed as inputs for now, since artifacts do not
 *   hold weights yet. Integer initializers and constants are folded into symbolic values.
 * - an input dim with dim_param becomes the symbolic variable of that name (made an identifier);
 *   an unnamed dynamic dim gets a fresh name d0, d1, ...
 * - shape computations (Shape, Gather, Concat, Unsqueeze, Squeeze, Cast, integer arithmetic,
 *   Range and ConstantOfShape of constants) are evaluated symbolically into shape literals.
 * An unsupported operator is one RX_ERR_UNSUPPORTED error listing every unsupported node with
 * its op type and the opset; a malformed file is an RX_ERR_INVALID error. */
#ifndef RX_ONNX_IMPORT_H
#define RX_ONNX_IMPORT_H

#include "../../base/base.h"
#include "relaxc/compiler.h"

#include <stddef.h>
#include <stdint.h>

/* Imports the model (bytes of an .onnx file, named `name` in messages) into m as `main`. The
 * function is added unnormalized-safe: every binding is deduced by the builder. diag may be
 * NULL. */
rx_status rx_onnx_import(rx_module *m, const void *bytes, size_t len, const char *name,
                         rx_diag *diag);

/* One weight: a parameter of `main` after the graph inputs. */
typedef struct rx_onnx_weight {
  char *name;        /* the parameter's name in the imported function */
  rx_dtype dtype;    /* f32 */
  int ndim;
  int64_t shape[8];
  float *data;       /* row-major, count elements (heap) */
  size_t count;
} rx_onnx_weight;

/* The weights of the model, in parameter order (heap array; free with rx_onnx_weights_free). */
rx_status rx_onnx_weights(const void *bytes, size_t len, const char *name,
                          rx_onnx_weight **out_weights, int *out_n);
void rx_onnx_weights_free(rx_onnx_weight *w, int n);

#endif
