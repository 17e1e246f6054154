/* frontends/gguf/experts.c: a sparse layer's experts from a GGUF file as the one stacked weight
 * moe_matmul and moe_gemv take (ops/moe.c), the layout the checkpoint path stacks too
 * (frontends/hf/llama.c, stack_experts), so that one builder serves both formats.
 *
 * llama.cpp's converter stacks each projection of a layer's experts into one tensor:
 * blk.N.ffn_gate_exps, ffn_up_exps [E, F, K] and ffn_down_exps [E, K, F] (relaxc's order,
 * outermost first; ggml's ne {K, F, E}), each expert's rows those of the checkpoint's [out, in]
 * weight. moe_matmul's gated weight is [E, 2F, K]: each expert's F gate rows, then its F up rows.
 * So gate and up are interleaved here per expert, at load (one copy of the layer's gate and up
 * bytes), rather than giving the MoE ops a second weight: the grouped GEMM, the GEMV, their
 * schedules and the quantized readers stay as they are, one launch for gate and up. The rows
 * move whole: a block format's row is a whole number of blocks (the reader proves it of every
 * tensor), so the interleaved rows are the file's blocks unchanged. When gate and up differ in
 * format (a k-quant mixture may give them different types), both are dequantized (the format's
 * definition, gguf_quant.c) to f32 and interleaved; the down projection is the file's tensor as
 * it is. */
#include "gguf.h"

#include "../hf/hf_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The dense dtype of a GGUF float type, or RX_DTYPE_UNKNOWN for a block format. */
static rx_dtype float_dtype(rx_gguf_type t) {
  return t == RX_GGUF_TYPE_F32    ? RX_DTYPE_F32
         : t == RX_GGUF_TYPE_F16  ? RX_DTYPE_F16
         : t == RX_GGUF_TYPE_BF16 ? RX_DTYPE_BF16
                                  : RX_DTYPE_UNKNOWN;
}

/* The tensor blk.l.<what>.weight, checked against [E, rows, cols]. */
static rx_status find(const rx_gguf_file *f, const rx_hf_config *c, int64_t l, const char *what,
                      int64_t rows, int64_t cols, const rx_gguf_tensor **out) {
  char name[96];
  snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)l, what);
  const rx_gguf_tensor *t = *out = gguf_find_tensor(f, name);
  const char *arch = c->arch_name ? c->arch_name : "ARCH";
  if (!t)
    return base_status_make(RX_ERR_NOT_FOUND,
                            "tensor '%s' (%s) is missing from the file: layer %lld holds the "
                            "router blk.%lld.ffn_gate_inp.weight, so its experts are expected as "
                            "[%lld, %lld, %lld] ('%s.expert_count', rows, columns)",
                            name, arch, (long long)l, (long long)l, (long long)c->experts,
                            (long long)rows, (long long)cols, arch);
  if (t->ndim != 3 || t->shape[0] != c->experts || t->shape[1] != rows || t->shape[2] != cols) {
    char got[96];
    size_t k = (size_t)snprintf(got, sizeof got, "[");
    for (int d = 0; d < t->ndim && k < sizeof got; d++)
      k += (size_t)snprintf(got + k, sizeof got - k, "%s%lld", d ? ", " : "",
                            (long long)t->shape[d]);
    if (k < sizeof got) snprintf(got + k, sizeof got - k, "]");
    return base_status_make(RX_ERR_INVALID,
                            "tensor '%s' has shape %s (outermost first), expected [%lld, %lld, "
                            "%lld] (from the %s.* metadata: expert_count %lld, embedding %lld, "
                            "expert feed-forward %lld)",
                            name, got, (long long)c->experts, (long long)rows, (long long)cols,
                            arch, (long long)c->experts, (long long)c->hidden,
                            (long long)c->moe_inter);
  }
  if (float_dtype(t->type) == RX_DTYPE_UNKNOWN) {
    rx_quant_scheme sc;
    if (!base_quant_lookup(gguf_type_name(t->type), &sc))
      return base_status_make(RX_ERR_UNSUPPORTED,
                              "tensor '%s' is %s: no quant_matmul scheme for the experts", name,
                              gguf_type_name(t->type));
  }
  return NULL;
}

/* The bytes of one row of t (cols elements): a float row, or its blocks. */
static size_t row_bytes(const rx_gguf_tensor *t) {
  return (size_t)(t->size / (uint64_t)(t->shape[0] * t->shape[1]));
}

rx_status hf_gguf_experts_read(const rx_gguf_file *f, const rx_hf_config *c, int64_t l, bool gated,
                               hf_gguf_experts *out) {
  memset(out, 0, sizeof *out);
  int64_t E = c->experts, F = c->moe_inter, K = c->hidden;
  const rx_gguf_tensor *t[2] = {NULL, NULL};
  if (!gated) {
    RX_RETURN_IF_ERROR(find(f, c, l, "ffn_down_exps", K, F, &t[0]));
  } else {
    RX_RETURN_IF_ERROR(find(f, c, l, "ffn_gate_exps", F, K, &t[0]));
    RX_RETURN_IF_ERROR(find(f, c, l, "ffn_up_exps", F, K, &t[1]));
  }
  const rx_gguf_tensor *a = t[0];
  if (!gated || a->type == t[1]->type) { /* the file's rows (and blocks) as they are */
    out->src = float_dtype(a->type);
    if (out->src == RX_DTYPE_UNKNOWN) {
      rx_quant_scheme sc;
      base_quant_lookup(gguf_type_name(a->type), &sc); /* find() proved it */
      out->qi = base_quant_info_of(sc);
      out->src = RX_DTYPE_U8;
    }
    out->row_bytes = row_bytes(a);
    if (!gated) {
      out->data = f->data + a->offset;
      return NULL;
    }
    size_t part = (size_t)F * out->row_bytes; /* one expert's gate (or up) rows */
    uint8_t *d = base_malloc(2 * part * (size_t)E);
    for (int64_t e = 0; e < E; e++)
      for (int p = 0; p < 2; p++)
        memcpy(d + ((size_t)e * 2 + (size_t)p) * part, f->data + t[p]->offset + (size_t)e * part,
               part);
    out->data = out->owned = d;
    return NULL;
  }
  /* gate and up in different formats: both dequantized to f32, then interleaved */
  size_t part = (size_t)(F * K);
  float *d = base_malloc(sizeof *d * 2 * part * (size_t)E);
  float *tmp = base_malloc(sizeof *tmp * part * (size_t)E);
  for (int p = 0; p < 2; p++) {
    gguf_dequantize(t[p]->type, f->data + t[p]->offset, t[p]->elems, tmp);
    for (int64_t e = 0; e < E; e++)
      memcpy(d + ((size_t)e * 2 + (size_t)p) * part, tmp + (size_t)e * part, sizeof *d * part);
  }
  free(tmp);
  out->src = RX_DTYPE_F32;
  out->row_bytes = sizeof *d * (size_t)K;
  out->data = out->owned = d;
  return NULL;
}
