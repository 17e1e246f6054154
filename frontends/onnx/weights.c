/* frontends/onnx/weights.c: the data of an ONNX model's weights, in the parameter order of the
 * imported `main` (see onnx_import.h). */
#include "onnx_import.h"
#include "proto.h"

#include <stdlib.h>
#include <string.h>

typedef struct wlist {
  rx_onnx_weight *w;
  int n;
  const char *file;
  rx_status s;
} wlist;

static void collect_weight(void *ctx, const char *name, const Onnx__TensorProto *t) {
  wlist *l = ctx;
  if (l->s) return;
  size_t c;
  float *f = onnx_is_external(t) || t->n_dims > 8 ? NULL : onnx_tensor_floats(t, &c);
  if (!f) {
    l->s = rx_status_make(RX_ERR_UNSUPPORTED,
                          "%s: weight '%s': only float32 data inline in the model is supported",
                          l->file, name);
    return;
  }
  rx_onnx_weight *w = &l->w[l->n++];
  w->name = onnx_ident(name);
  w->dtype = RX_DTYPE_F32;
  w->ndim = (int)t->n_dims;
  for (size_t i = 0; i < t->n_dims; i++) w->shape[i] = t->dims[i];
  w->data = f;
  w->count = c;
}

rx_status rx_onnx_weights(const void *bytes, size_t len, const char *name,
                          rx_onnx_weight **out_weights, int *out_n) {
  *out_weights = NULL;
  *out_n = 0;
  if (!name) name = "<onnx>";
  Onnx__ModelProto *mp;
  RX_RETURN_IF_ERROR(onnx_unpack(bytes, len, name, &mp));
  const Onnx__GraphProto *g = mp->graph;
  wlist l = {.w = rx_calloc(g->n_initializer + g->n_node + 1, sizeof(rx_onnx_weight)),
             .file = name};
  onnx_each_weight(g, collect_weight, &l);
  onnx__model_proto__free_unpacked(mp, NULL);
  if (l.s) {
    rx_onnx_weights_free(l.w, l.n);
    return l.s;
  }
  *out_weights = l.w;
  *out_n = l.n;
  return NULL;
}

void rx_onnx_weights_free(rx_onnx_weight *w, int n) {
  for (int i = 0; i < n; i++) {
    free(w[i].name);
    free(w[i].data);
  }
  free(w);
}
