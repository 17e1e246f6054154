/* The op registry: the table built from ops/ops.def, lookup by name, attribute access, the
 * error/warning reporters used by deduction, and ops_registry, the table of functions through
 * which every module (rx_module.ops) gives ir/ its ops. */
#include "deduce.h"
#include "legalize.h"

#include <assert.h>
#include <string.h>

/* ---- attribute schemas (each ends with a {NULL} sentinel) ---- */

static const rx_attr_schema attrs_none[] = {{NULL, 0, false, NULL}};
static const rx_attr_schema attrs_cast[] = {{"dtype", RX_ATTR_DTYPE, true, "the result dtype"},
                                            {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_check_nonzero[] = {
    {"message", RX_ATTR_STR, true, "what a 0 means (\"delta in Range operator can not be zero!\")"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_dtype[] = {
    {"dtype", RX_ATTR_DTYPE, false, "the result dtype (default f32)"}, {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_full[] = {
    {"dtype", RX_ATTR_DTYPE, false, "the result dtype (default: the fill value's)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_permute[] = {
    {"axes", RX_ATTR_INTS, false, "the permutation (default: reverse)"}, {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_expand_dims[] = {
    {"axes", RX_ATTR_INTS, true, "positions of the new dims in the result"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_squeeze[] = {
    {"axes", RX_ATTR_INTS, false, "dims to remove (default: every provably-1 dim)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_concat[] = {
    {"axis", RX_ATTR_INT, false, "the concatenation axis (default 0)"}, {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_split[] = {
    {"sections", RX_ATTR_INT, false, "split into this many equal parts"},
    {"axis", RX_ATTR_INT, false, "the split axis (default 0)"},
    {"indices", RX_ATTR_INTS, false, "split before these ascending indices (instead of sections)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_strided_slice[] = {
    {"axes", RX_ATTR_INTS, true, "the sliced axes"},
    {"begin", RX_ATTR_EXPRS, true, "first index per axis (symbolic; negative counts from end)"},
    {"end", RX_ATTR_EXPRS, true, "end index per axis (symbolic; clamped)"},
    {"strides", RX_ATTR_INTS, false, "step per axis (default 1; nonzero constants)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_kv_append_rope[] = {
    {"k_offset", RX_ATTR_INT, false, "the keys' first column in k's rows (default 0)"},
    {"v_offset", RX_ATTR_INT, false, "the values' first column in v's rows (default 0)"},
    {"q_offset", RX_ATTR_INT, false, "the queries' first column in q's rows (default 0)"},
    {"q_heads", RX_ATTR_INT, false,
     "the query heads (with q, argument 7: roped as a second output)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_take[] = {
    {"axis", RX_ATTR_INT, false, "the gathered axis (default 0)"}, {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_scatter[] = {
    {"axis", RX_ATTR_INT, false, "the scattered axis (default 0)"},
    {"reduction", RX_ATTR_STR, false, "\"none\" (default), \"add\", \"mul\", \"min\" or \"max\""},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_einsum[] = {
    {"equation", RX_ATTR_STR, true, "explicit, letters only: \"ij,jk->ik\""},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_grid_sample[] = {
    {"mode", RX_ATTR_STR, false, "\"bilinear\" (default), \"nearest\" or \"bicubic\""},
    {"padding_mode", RX_ATTR_STR, false, "\"zeros\" (default), \"border\" or \"reflection\""},
    {"align_corners", RX_ATTR_BOOL, false,
     "-1 and 1 are the corner pixels' centers (default false: their edges)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_reduce[] = {
    {"axes", RX_ATTR_INTS, false, "reduced axes (default: all)"},
    {"keepdims", RX_ATTR_BOOL, false, "keep reduced dims as 1 (default false)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_argmax[] = {
    {"axis", RX_ATTR_INT, false, "the reduced axis (default -1)"},
    {"keepdims", RX_ATTR_BOOL, false, "keep the reduced dim as 1 (default false)"},
    {"select_last_index", RX_ATTR_BOOL, false, "the last index of ties (default: the first)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_cumsum[] = {
    {"axis", RX_ATTR_INT, false, "the scanned axis (default -1)"},
    {"exclusive", RX_ATTR_BOOL, false, "each sum leaves out its own element (default false)"},
    {"reverse", RX_ATTR_BOOL, false, "sum from the end of the axis (default false)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_topk[] = {
    {"k", RX_ATTR_EXPRS, true, "[k]: how many elements (symbolic)"},
    {"axis", RX_ATTR_INT, false, "the selected axis (default -1)"},
    {"largest", RX_ATTR_BOOL, false, "the largest elements (default true; false: the smallest)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_softmax[] = {
    {"axis", RX_ATTR_INT, false, "the normalized axis (default -1)"}, {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_norm[] = {
    {"axes", RX_ATTR_INTS, false, "normalized axes (default [-1])"},
    {"epsilon", RX_ATTR_FLOAT, false, "added to the variance (default 1e-5)"},
    {"dtype", RX_ATTR_DTYPE, false,
     "the output's floating-point dtype (default x's): the norm computed in f32 and rounded to it "
     "once, so a norm feeding a matmul in f16 needs no cast kernel of its own"},
    {NULL, 0, false, NULL}};

static const rx_attr_schema attrs_gelu[] = {
    {"approximate", RX_ATTR_STR, false, "\"none\" (erf form, default) or \"tanh\""},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_quant_matmul[] = {
    {"scheme", RX_ATTR_STR, true,
     "the weight's quantization scheme (base/quant.h): q4f16_g32, Q4_0, ..."},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_rms_norm_matmul[] = {
    {"epsilon", RX_ATTR_FLOAT, false, "added to the mean square (default 1e-5)"},
    {"dtype", RX_ATTR_DTYPE, false, "the result dtype, and the operand's rounding (default W's)"},
    {"scheme", RX_ATTR_STR, false, "W's quantization scheme, as quant_matmul's (default: none)"},
    {"gated", RX_ATTR_BOOL, false, "two weights: silu(x W^T) * (x W2^T) (default false)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_quant_take[] = {
    {"scheme", RX_ATTR_STR, true, "the table's quantization scheme, as quant_matmul's"},
    {"dtype", RX_ATTR_DTYPE, true, "the result dtype: f32 or f16"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_clip[] = {{"min", RX_ATTR_FLOAT, true, "lower bound"},
                                            {"max", RX_ATTR_FLOAT, true, "upper bound"},
                                            {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_attention[] = {
    {"causal", RX_ATTR_BOOL, false, "mask key j > query i + (t - s) (default false)"},
    {"scale", RX_ATTR_FLOAT, false, "score scale (default 1 / sqrt(d))"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_paged_attention[] = {
    {"scale", RX_ATTR_FLOAT, false, "score scale (default 1 / sqrt(d))"},
    {"window", RX_ATTR_INT, false, "keys within this many positions of the query (default 0: all)"},
    {"softcap", RX_ATTR_FLOAT, false, "scores tanh(s / c) * c before the softmax (default: none)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_paged_decode_attention[] = {
    {"scale", RX_ATTR_FLOAT, false, "score scale (default 1 / sqrt(d))"},
    {"window", RX_ATTR_INT, false, "keys within this many positions of the query (default 0: all)"},
    {"softcap", RX_ATTR_FLOAT, false, "scores tanh(s / c) * c before the softmax (default: none)"},
    {"chunk", RX_ATTR_INT, false, "keys per chunk of the split, a multiple of 16 (default 256)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_moe_group[] = {
    {"num_experts", RX_ATTR_INT, true, "E: the experts, ids 0 .. E - 1 (1 .. 65536)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_moe_matmul[] = {
    {"top_k", RX_ATTR_INT, true, "k: the experts of each token (order[j] // k is its token)"},
    {"gathered", RX_ATTR_BOOL, false,
     "x has a row per (token, slot) pair, [n * k, K] (default false: a row per token, [n, K])"},
    {"gated", RX_ATTR_BOOL, false,
     "w [E, 2F, K] (gate rows, then up rows): silu(gate) * up, [n * k, F] (default false)"},
    {"scheme", RX_ATTR_STR, false, "w's quantization scheme, as quant_matmul's (default: none)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_allreduce[] = {
    {"op", RX_ATTR_STR, false, "\"sum\" (default) or \"max\""}, {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_allgather[] = {
    {"axis", RX_ATTR_INT, true, "the dim the ranks' blocks are concatenated along"},
    {"world", RX_ATTR_INT, true, "the number of ranks"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_reduce_scatter[] = {
    {"axis", RX_ATTR_INT, true, "the dim split into the ranks' blocks"},
    {"world", RX_ATTR_INT, true, "the number of ranks"},
    {"op", RX_ATTR_STR, false, "\"sum\" (default) or \"max\""},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_broadcast[] = {
    {"root", RX_ATTR_INT, false, "the rank whose x every rank gets (default 0)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_send[] = {{"peer", RX_ATTR_INT, true, "the receiving rank"},
                                            {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_recv[] = {
    {"peer", RX_ATTR_INT, true, "the sending rank"},
    {"dtype", RX_ATTR_DTYPE, false, "the dtype received (default f32)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_moe_gemv[] = {
    {"gathered", RX_ATTR_BOOL, false,
     "x has a row per (token, slot) pair, [n * k, K] (default false: a row per token, [n, K])"},
    {"gated", RX_ATTR_BOOL, false,
     "w [E, 2F, K] (gate rows, then up rows): silu(gate) * up, [n * k, F] (default false)"},
    {"scheme", RX_ATTR_STR, false, "w's quantization scheme, as quant_matmul's (default: none)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_ragged_attention[] = {
    {"scale", RX_ATTR_FLOAT, false, "score scale (default 1 / sqrt(d))"}, {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_attention_merge[] = {
    {"dtype", RX_ATTR_DTYPE, false, "the result dtype (default f32)"}, {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_conv2d[] = {
    {"strides", RX_ATTR_INTS, false, "[sh, sw] (default [1, 1])"},
    {"padding", RX_ATTR_INTS, false, "[ph, pw] or [top, left, bottom, right] (default 0)"},
    {"dilation", RX_ATTR_INTS, false, "[dh, dw] (default [1, 1])"},
    {"groups", RX_ATTR_INT, false, "channel groups (default 1)"},
    {"data_layout", RX_ATTR_STR, false,
     "\"NCHW\" (default: weight OIHW) or \"NHWC\" (weight HWIO [KH, KW, C / groups, O])"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_pool[] = {
    {"kernel", RX_ATTR_INTS, true, "[kh, kw]"},
    {"strides", RX_ATTR_INTS, false, "[sh, sw] (default: kernel)"},
    {"padding", RX_ATTR_INTS, false, "[ph, pw] or [top, left, bottom, right] (default 0)"},
    {"dilation", RX_ATTR_INTS, false, "[dh, dw] (default [1, 1])"},
    {"count_include_pad", RX_ATTR_BOOL, false,
     "avg_pool2d: divide by kh * kw (true, default) or by the in-bounds count (false)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_pool_index[] = {
    {"kernel", RX_ATTR_INTS, true, "[kh, kw]"},
    {"strides", RX_ATTR_INTS, false, "[sh, sw] (default: kernel)"},
    {"padding", RX_ATTR_INTS, false, "[ph, pw] or [top, left, bottom, right] (default 0)"},
    {"dilation", RX_ATTR_INTS, false, "[dh, dw] (default [1, 1])"},
    {"storage_order", RX_ATTR_INT, false,
     "0: [N, C, H, W] row-major (default); 1: H and W swapped"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_batch_norm[] = {
    {"epsilon", RX_ATTR_FLOAT, false, "added to the variance (default 1e-5)"},
    {"axis", RX_ATTR_INT, false, "the channel axis (default 1)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_dft[] = {
    {"axis", RX_ATTR_INT, false, "the signal axis (default 1); not the last"},
    {"inverse", RX_ATTR_BOOL, false, "the inverse transform, divided by L (default false)"},
    {"onesided", RX_ATTR_BOOL, false, "only the L / 2 + 1 first frequencies (default false)"},
    {"length", RX_ATTR_EXPRS, false, "[L]: the transform's length (symbolic; default N)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_nms[] = {
    {"center_point_box", RX_ATTR_INT, false,
     "0: boxes as [y1, x1, y2, x2] corners (default); 1: [x_center, y_center, width, height]"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_roi_align[] = {
    {"output_height", RX_ATTR_INT, false, "bins per region, down (default 1)"},
    {"output_width", RX_ATTR_INT, false, "bins per region, across (default 1)"},
    {"sampling_ratio", RX_ATTR_INT, false,
     "sampling points per bin and axis (default 0: adaptive)"},
    {"spatial_scale", RX_ATTR_FLOAT, false, "rois' coordinates times this are x's (default 1)"},
    {"mode", RX_ATTR_STR, false, "\"avg\" (default) or \"max\""},
    {"half_pixel", RX_ATTR_BOOL, false, "shift the regions by -0.5 pixel (default true)"},
    {NULL, 0, false, NULL}};
static const rx_attr_schema attrs_tfidf[] = {
    {"pool", RX_ATTR_INTS, true, "the n-grams, by length, each its elements in order"},
    {"counts", RX_ATTR_INTS, true, "where in pool the n-grams of length 1, 2, ... start"},
    {"indexes", RX_ATTR_INTS, true, "the output index of each n-gram of the pool, in order"},
    {"min_gram", RX_ATTR_INT, false, "shortest n-gram counted (default 1)"},
    {"max_gram", RX_ATTR_INT, false, "longest n-gram counted (default 1)"},
    {"max_skip", RX_ATTR_INT, false, "most elements skipped between an n-gram's (default 0)"},
    {NULL, 0, false, NULL}};

#define NATTRS(a) ((int)RX_ARRAY_LEN(a) - 1)

/* ---- the table ---- */

static const rx_op ops[] = {
#define OP(id, name, min_args, max_args, attrs, deduce, pattern, legalize, formula, batch, doc)    \
  {RX_OP_##id,                                                                                     \
   name,                                                                                           \
   min_args,                                                                                       \
   max_args,                                                                                       \
   NATTRS(attrs) ? attrs : NULL,                                                                   \
   NATTRS(attrs),                                                                                  \
   deduce,                                                                                         \
   doc,                                                                                            \
   RX_PATTERN_##pattern,                                                                           \
   RX_BATCH_##batch},
#include "ops.def"
#undef OP
};

static const rx_op *const op_ptrs[] = {
#define OP(id, name, min_args, max_args, attrs, deduce, pattern, legalize, formula, batch, doc)    \
  &ops[RX_OP_##id],
#include "ops.def"
#undef OP
};

const rx_op *ops_op_lookup(const char *name, size_t len) {
  for (size_t i = 0; i < RX_ARRAY_LEN(ops); i++)
    if (strlen(ops[i].name) == len && memcmp(ops[i].name, name, len) == 0) return &ops[i];
  return NULL;
}

const rx_op *const *ops_op_all(int *out_count) {
  if (out_count) *out_count = RX_OP_COUNT;
  return op_ptrs;
}

bool ops_op_is_host_call(const rx_node *call) {
  if (!call || call->kind != RX_NODE_CALL || !call->op) return false;
  if (call->op->id == RX_OP_tensor_to_shape) return true;
  if (call->op->id != RX_OP_reshape || call->nargs < 1) return false;
  const rx_sinfo *x = call->args[0]->sinfo, *r = call->sinfo;
  bool x_known = x && (x->kind == RX_SINFO_PRIM || /* a 0-d tensor */
                       (x->kind == RX_SINFO_TENSOR && x->ndim >= 0 && x->shape));
  bool r_known = r && r->kind == RX_SINFO_TENSOR && r->ndim >= 0 && r->shape;
  return !x_known || !r_known;
}

const rx_attr *ops_call_attr(const rx_node *call, const char *name) {
  for (int i = 0; i < call->nattrs; i++)
    if (call->attrs[i].name && strcmp(call->attrs[i].name, name) == 0) return &call->attrs[i];
  return NULL;
}

void ops_deduce_error(rx_deduce_ctx *dc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  base_diag_vreport(dc->diag, RX_DIAG_ERROR, dc->loc, fmt, ap);
  va_end(ap);
}

void ops_deduce_warn(rx_deduce_ctx *dc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  base_diag_vreport(dc->diag, RX_DIAG_WARNING, dc->loc, fmt, ap);
  va_end(ap);
}

/* ---- the registry's functions: ir/ sees an op only through them, in ops_registry (ir/ir.h's
 * ir_op_registry), the floors above call them by name (ops/ops.h) ---- */

const char *ops_op_name(const rx_op *op) { return op->name; }
int ops_op_min_args(const rx_op *op) { return op->min_args; }
int ops_op_max_args(const rx_op *op) { return op->max_args; }
int ops_op_nattrs(const rx_op *op) { return op->nattrs; }

const rx_attr_schema *ops_op_attr(const rx_op *op, int i) {
  assert(i >= 0 && i < op->nattrs);
  return &op->attrs[i];
}

const rx_sinfo *ops_op_deduce_call(rx_module *m, rx_analyzer *an, rx_diag *diag, rx_loc loc,
                                   const rx_node *call) {
  rx_deduce_ctx dc = {m, an, diag, loc};
  return call->op->deduce ? call->op->deduce(&dc, call) : NULL;
}

int ops_op_inplace_arg(const rx_op *op) { return ops_legalize_inplace_arg(op); }

const ir_op_registry ops_registry = {
    .lookup = ops_op_lookup,
    .name = ops_op_name,
    .min_args = ops_op_min_args,
    .max_args = ops_op_max_args,
    .nattrs = ops_op_nattrs,
    .attr = ops_op_attr,
    .inplace_arg = ops_op_inplace_arg,
};
