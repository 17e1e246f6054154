/* frontends/hf/ckpt_quant.c: the tensors of a projection that a quantization tool stored (issue
 * 32), by the names and in the layouts the tools write, checked and handed to quant_matmul as
 * they are in the file (base/quant.h's awq_gG, gptq, gptq_v2, fp8_e4m3, fp8_e4m3_ch):
 *
 *   AutoAWQ (gemm)   MODULE.qweight i32 [in, out / 8], MODULE.scales f16 [in / G, out],
 *                    MODULE.qzeros i32 [in / G, out / 8]
 *   GPTQ             MODULE.qweight i32 [in / 8, out], MODULE.scales f16 [groups, out],
 *                    MODULE.qzeros i32 [groups, out / 8], MODULE.g_idx i32 [in] (each in
 *                    [0, groups)); groups = ceil(in / group_size), 1 for group_size -1
 *   compressed-tensors FP8  MODULE.weight F8_E4M3 [out, in], MODULE.weight_scale f32, f16 or bf16:
 *                    [1] or [] (per tensor), [out, 1] (per channel); read as f32
 *
 * The checks come first, so a kernel never reads out of bounds: a missing tensor, a dtype or
 * shape other than these, a g_idx out of range each make an error that names the tensor and what
 * was expected. */
#include "hf_int.h"

#include <stdio.h>
#include <string.h>

static void set(hf_qbuf *b, const char *module, const char *suffix, rx_dtype dt, int ndim,
                int64_t r, int64_t c) {
  snprintf(b->name, sizeof b->name, "%s.%s", module, suffix);
  b->dtype = dt;
  b->ndim = ndim;
  b->shape[0] = r;
  b->shape[1] = c;
  b->data = NULL;
  b->src = dt;
}

void hf_ckpt_quant_layout(const rx_hf_config *c, const char *module, int64_t out, int64_t in,
                          hf_qbufs *qb) {
  const rx_quant_info *qi = base_quant_info_of(c->qscheme);
  memset(qb, 0, sizeof *qb);
  switch (qi->kind) {
  case RX_QUANT_AWQ: {
    int64_t G = qi->block;
    qb->n = 3;
    set(&qb->b[0], module, "qweight", RX_DTYPE_I32, 2, in, out / 8);
    set(&qb->b[1], module, "scales", RX_DTYPE_F16, 2, in / G, out);
    set(&qb->b[2], module, "qzeros", RX_DTYPE_I32, 2, in / G, out / 8);
    break;
  }
  case RX_QUANT_GPTQ:
  case RX_QUANT_GPTQ_V2: {
    int64_t groups = c->qgroup > 0 ? (in + c->qgroup - 1) / c->qgroup : 1;
    qb->n = 4;
    set(&qb->b[0], module, "qweight", RX_DTYPE_I32, 2, in / 8, out);
    set(&qb->b[1], module, "scales", RX_DTYPE_F16, 2, groups, out);
    set(&qb->b[2], module, "qzeros", RX_DTYPE_I32, 2, groups, out / 8);
    set(&qb->b[3], module, "g_idx", RX_DTYPE_I32, 1, in, 0);
    break;
  }
  default: /* FP8 */
    RX_ASSERT(qi->kind == RX_QUANT_FP8 || qi->kind == RX_QUANT_FP8_CH);
    qb->n = 2;
    set(&qb->b[0], module, "weight", RX_DTYPE_U8, 2, out, in);
    set(&qb->b[1], module, "weight_scale", RX_DTYPE_F32, 2, qi->kind == RX_QUANT_FP8 ? 1 : out, 1);
  }
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* Whether t has b's shape; FP8's per-tensor scale may be [1] or a scalar [] as well. */
static bool same_shape(const rx_st_tensor *t, const hf_qbuf *b, bool scalar_ok) {
  if (scalar_ok && (t->ndim == 0 || (t->ndim == 1 && t->shape[0] == 1))) return true;
  if (t->ndim != b->ndim) return false;
  for (int d = 0; d < b->ndim; d++)
    if (t->shape[d] != b->shape[d]) return false;
  return true;
}

/* The bytes of buffer k of qb found and checked against its layout. */
static rx_status read_one(const hf_ckpt *ck, const rx_hf_config *c, int k, hf_qbufs *qb,
                          int64_t out, int64_t in) {
  hf_qbuf *b = &qb->b[k];
  const rx_quant_info *qi = base_quant_info_of(c->qscheme);
  const uint8_t *data;
  const rx_st_tensor *t = hf_ckpt_find(ck, b->name, &data);
  bool fp8 = qi->kind == RX_QUANT_FP8 || qi->kind == RX_QUANT_FP8_CH;
  char want[64], got[64];
  shape_str(want, sizeof want, b->ndim, b->shape);
  if (!t)
    return base_status_make(RX_ERR_NOT_FOUND,
                            "tensor '%s' is missing from the checkpoint: quantization_config (%s, "
                            "scheme %s) stores W [%lld, %lld] as %s %s there",
                            b->name, c->qmethod, qi->name, (long long)out, (long long)in,
                            fp8 && k == 0 ? "F8_E4M3" : ir_dtype_name(b->dtype), want);
  bool scale = fp8 && k == 1;
  bool dt_ok = fp8 && k == 0 ? t->f8_e4m3
               : scale       ? ir_dtype_is_float(t->dtype) && t->dtype != RX_DTYPE_F64
                             : t->dtype == b->dtype && !t->f8_e4m3;
  shape_str(got, sizeof got, t->ndim, t->shape);
  if (!dt_ok || !same_shape(t, b, scale && qi->kind == RX_QUANT_FP8))
    return base_status_make(RX_ERR_INVALID,
                            "tensor '%s' is %s %s: expected %s %s (%s, scheme %s, W [%lld, %lld])",
                            b->name, t->f8_e4m3 ? "F8_E4M3" : ir_dtype_name(t->dtype), got,
                            fp8 && k == 0 ? "F8_E4M3"
                            : scale       ? "f32, f16 or bf16"
                                          : ir_dtype_name(b->dtype),
                            want, c->qmethod, qi->name, (long long)out, (long long)in);
  b->data = data;
  b->src = scale ? t->dtype : b->dtype;
  if (k == 3) { /* g_idx: each k's group inside the scales' rows */
    for (int64_t i = 0; i < in; i++) {
      int32_t gi;
      memcpy(&gi, data + 4 * i, sizeof gi);
      if (gi < 0 || gi >= qb->b[1].shape[0])
        return base_status_make(RX_ERR_INVALID,
                                "tensor '%s' [%lld] is %d: expected a group in [0, %lld) (the rows "
                                "of '%s')",
                                b->name, (long long)i, gi, (long long)qb->b[1].shape[0],
                                qb->b[1].name);
    }
  }
  return NULL;
}

rx_status hf_ckpt_quant_read(const hf_ckpt *ck, const rx_hf_config *c, const char *module,
                             int64_t out, int64_t in, hf_qbufs *qb) {
  const rx_quant_info *qi = base_quant_info_of(c->qscheme);
  hf_ckpt_quant_layout(c, module, out, in, qb);
  bool packed = qi->kind == RX_QUANT_AWQ || qi->kind == RX_QUANT_GPTQ ||
                qi->kind == RX_QUANT_GPTQ_V2; /* eight outputs per int32 of qzeros */
  if ((packed && out % 8 != 0) || in % qi->block != 0)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "'%s' [%lld, %lld] in scheme %s: expected %sin a multiple of %d",
                            module, (long long)out, (long long)in, qi->name,
                            packed ? "out a multiple of 8 and " : "", qi->block);
  for (int k = 0; k < qb->n; k++) RX_RETURN_IF_ERROR(read_one(ck, c, k, qb, out, in));
  return NULL;
}
