/* frontends/onnx/import_int.h: what the files of the ONNX importer share (internal header of
 * relaxc_core). import.c walks the model and the graph, keeps the value table and holds the one
 * table of operators, onnx_ops[]; the handlers live one file per family of operators, as
 * onnx-mlir splits its lowering (ONNXToKrnl/{Math,NN,Tensor,RNN,ControlFlow,Quantization}):
 *   import_elementwise.c  elementwise math: unary, binary, Where, Clip, Cast, MatMul, Gemm, Det
 *   import_reduce.c       activations and reductions: Softmax, Gelu, Elu, the Reduce ops, CumSum
 *   import_nn.c           Conv, ConvTranspose, the pools, the normalizations, Dropout, losses
 *   import_resize.c       Resize, Upsample and GridSample
 *   import_shape.c        shape and layout: Shape, Size, Reshape, Expand, Concat, Squeeze,
 *                         Transpose, Flatten, DepthToSpace, Constant, Identity
 *   import_index.c        indexing: Gather*, Slice, Split, Pad, Tile, TopK, OneHot, Trilu, Range
 *   import_scatter.c      Scatter*, MaxUnpool, ReverseSequence, Einsum
 *   import_signal.c       NonMaxSuppression, DFT, STFT, the windows, RoiAlign, MelWeightMatrix,
 *                         TfIdfVectorizer
 *   import_rt.c           operator inputs given at run time (axes, starts, ends, Range's bounds),
 *                         NonZero, Compress, Unique
 *   import_control.c      If, Loop, Scan
 *   import_quant.c        quantization, Pow of mixed dtypes, BitShift
 *   import_rnn.c          RNN, GRU, LSTM
 * Each helper keeps the comment at its definition. */
#ifndef RX_ONNX_IMPORT_INT_H
#define RX_ONNX_IMPORT_INT_H

#include "../../ir/ir.h"
#include "../../ops/ops.h"

#include "proto.h"

/* longest symbolic integer vector (a shape of rank up to 16): the integer tensors of at most
 * this many elements are folded, not weights (proto.h) */
#define SYM_MAX ONNX_FOLD_MAX

/* V_FAILED: an output of a node that could not be imported (its users are skipped) */
typedef enum vkind { V_TENSOR, V_SYM, V_FCONST, V_FAILED } vkind;

typedef struct val {
  const char *name; /* the ONNX value name (owned by the unpacked model) */
  vkind kind;
  rx_var *var; /* V_TENSOR */
  bool rt;     /* V_TENSOR: s holds its values, bound at run time (onnx_runtime_sym) */
  int sndim;   /* V_SYM (and rt): 0 scalar, 1 vector */
  int slen;    /* V_SYM (and rt): number of values (1 for a scalar) */
  const rx_expr *s[SYM_MAX]; /* V_SYM (and rt) */
  double f;                  /* V_FCONST */
  rx_dtype sdt;              /* V_SYM, V_FCONST: the dtype as a tensor (0: i64 / f32) */
  rx_var *tvar;              /* V_SYM: its tensor once an op used it as data (onnx_sym_tensor) */
  int nfl;                   /* V_TENSOR: a 1-D f32 weight of at most SYM_MAX elements, read at */
  float fl[SYM_MAX];         /* import (nfl of them; 0: not read): Resize's constant scales */
} val;

typedef struct imp {
  rx_module *m;
  rx_builder *b;
  const char *file;
  const char *base_dir; /* external data files are relative to it (NULL: the current dir) */
  int64_t opset;
  val *vals;
  int nvals, cap;
  int fresh;       /* next fresh dim name d<N> */
  int ncf;         /* next number of a control-flow driver (import_control.c's cf_name): a nested
                      one is named while its outer one's functions are not in the module yet */
  rx_analyzer *an; /* facts: every dim variable is a size (>= 0); simplifies shape values */
} imp;

/* The forms of onnx_ops[]'s rows (which variant a handler of several op types computes), listed
 * once by the handler that reads them: X(form) gives ONNX_FORM_<form>, and onnx_form_name its
 * text, so a misspelt form does not compile. */
// clang-format off
#define ONNX_FORMS(X)                                                                              \
  /* onnx_do_formula */                                                                            \
  X(sign) X(tan) X(sinh) X(cosh) X(asinh) X(acosh) X(atanh)                                        \
  /* onnx_do_act, onnx_do_elu, onnx_do_select_act */                                              \
  X(celu) X(hard_sigmoid) X(hard_swish) X(softplus) X(softsign) X(thresholded_relu) X(mish)        \
  X(is_nan) X(elu) X(selu) X(is_inf) X(round) X(shrink)                                            \
  /* onnx_do_reduce_by */                                                                          \
  X(l1) X(l2) X(sum_square) X(log_sum) X(log_sum_exp)                                              \
  /* onnx_do_nll_loss, onnx_do_instance_norm, onnx_do_depth_space, onnx_do_window */               \
  X(nll) X(sce) X(instance_norm) X(mvn) X(depth_to_space) X(space_to_depth) X(hann) X(hamming)     \
  X(blackman)                                                                                      \
  /* onnx_do_integer_op */                                                                         \
  X(matmul) X(conv) X(qmatmul) X(qconv)
// clang-format on
typedef enum onnx_form {
  ONNX_FORM_NONE, /* a row whose handler computes one form */
#define ONNX_FORM_ENUM_(f) ONNX_FORM_##f,
  ONNX_FORMS(ONNX_FORM_ENUM_)
#undef ONNX_FORM_ENUM_
      ONNX_FORM_COUNT
} onnx_form;
/* the form's name as the table lists it ("celu"; "none" for ONNX_FORM_NONE) */
const char *onnx_form_name(onnx_form f);

/* The row of onnx_ops[] (import.c) of an ONNX op type: the handler that imports a node of the
 * type, the relaxc op the handler emits when it is one op (op; ONNX_NO_OP when the handler
 * composes several) or the form it computes when the handler serves several types (form, as
 * ONNX_FORM_celu for onnx_do_act; ONNX_FORM_NONE when none), the opsets where the handler's
 * reading is right (first, last; last 0: still current) and a note for the README. */
typedef struct onnx_op onnx_op;
typedef rx_status (*onnx_handler)(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
struct onnx_op {
  const char *type;
  onnx_handler handler;
  rx_op_id op;
  onnx_form form;
  int first, last;
  const char *note;
};
/* no single relaxc op: the handler composes several */
#define ONNX_NO_OP RX_OP_COUNT

/* ---- the value table and the helpers shared by the handlers (import.c) ---- */

rx_status onnx_node_err(imp *I, const Onnx__NodeProto *n, const char *fmt, ...) RX_PRINTF(3, 4);
val *onnx_get(imp *I, const char *name);
val *onnx_def(imp *I, const char *name);
const char *onnx_input(const Onnx__NodeProto *n, size_t i);
rx_status onnx_sym_tensor(imp *I, const Onnx__NodeProto *n, val *v, rx_var **out);
rx_status onnx_do_node(imp *I, const Onnx__NodeProto *n);
rx_status onnx_arg(imp *I, const Onnx__NodeProto *n, const char *name, rx_node **out);
rx_status onnx_at_node(imp *I, const Onnx__NodeProto *n, rx_status s);
const char *onnx_op_name(rx_op_id op);
rx_status onnx_emit(imp *I, const Onnx__NodeProto *n, rx_op_id op, rx_node *const *args, int nargs,
                    const rx_attr *const *attrs, int nattrs, rx_var **out);
val *onnx_def_named(imp *I, const char *name, rx_var *var);
val *onnx_def_tensor(imp *I, const Onnx__NodeProto *n, rx_var *var);
void onnx_def_alias(imp *I, const Onnx__NodeProto *n, const val *src);
const rx_sinfo *onnx_tsinfo(val *v);
int onnx_rank_of(val *v);
bool onnx_match_cast_to(imp *I, rx_var *v, rx_dtype dtype, int ndim, const rx_expr *const *dims,
                        rx_var **out);
int onnx_runtime_len(val *v);
const rx_expr *onnx_fresh_dim(imp *I);
rx_status onnx_runtime_sym(imp *I, const Onnx__NodeProto *n, val *v);
rx_status onnx_sym_input(imp *I, const Onnx__NodeProto *n, size_t i, val **out);
rx_status onnx_int_list(imp *I, const Onnx__NodeProto *n, size_t i, const char *name, int64_t *out,
                        int *count);
bool onnx_sym_is_logic(const char *op);
const rx_expr *onnx_sym_binary(imp *I, const char *op, const rx_expr *a, const rx_expr *b);
double onnx_fconst_binary(const char *op, double a, double b);
rx_status onnx_def_constant(imp *I, const Onnx__NodeProto *n, const char *name,
                            const Onnx__TensorProto *t);
bool onnx_cast_to_common(imp *I, val *x, val *y, rx_node **ax, rx_node **ay);
rx_status onnx_sym_list(imp *I, const Onnx__NodeProto *n, size_t i, const char *name,
                        const rx_expr **out, int *count);
bool onnx_attr_s_is(const Onnx__NodeProto *n, const char *name, const char *want);
rx_status onnx_ints_attr(imp *I, const Onnx__NodeProto *n, const char *name, int want, int64_t dflt,
                         int64_t *out);
rx_status onnx_ex(imp *I, const Onnx__NodeProto *n, rx_op_id op, int nargs, rx_node *a0,
                  rx_node *a1, rx_node *a2, rx_node **out, rx_var **last);
rx_status onnx_exa(imp *I, const Onnx__NodeProto *n, rx_op_id op, rx_node *const *a, int na,
                   const rx_attr *const *at, int nat, rx_node **out, rx_var **last);
const onnx_op *onnx_find_op(const char *op);
rx_status onnx_out_tensor(imp *I, const Onnx__NodeProto *n, const char *name, rx_var **out);

/* op(args) as a new binding in a handler that has I, n and rx_var *r: EX1 to EX3 by onnx_ex,
 * EXA (one argument, with attributes) by onnx_exa; FL a float literal, I64 an i64 prim */
#define EX1(op, x, out)       RX_RETURN_IF_ERROR(onnx_ex(I, n, op, 1, x, NULL, NULL, &(out), &r))
#define EX2(op, x, y, out)    RX_RETURN_IF_ERROR(onnx_ex(I, n, op, 2, x, y, NULL, &(out), &r))
#define EX3(op, x, y, z, out) RX_RETURN_IF_ERROR(onnx_ex(I, n, op, 3, x, y, z, &(out), &r))
#define EXA(op, x, at, nat, out)                                                                   \
  RX_RETURN_IF_ERROR(onnx_exa(I, n, op, &(x), 1, at, nat, &(out), &r))
#define FL(v)  rx_arg_float(I->b, (v))
#define I64(e) rx_arg_prim(I->b, RX_DTYPE_I64, (e))

/* ---- helpers one family lends another ---- */

/* import_nn.c */
rx_status onnx_reshape_to(imp *I, const Onnx__NodeProto *n, rx_node *x, const rx_expr *const *dims,
                          int k, rx_node **out, rx_var **last);
rx_status onnx_known_shape(imp *I, const Onnx__NodeProto *n, size_t i, int lo, int hi,
                           const rx_sinfo **out);

/* import_resize.c */
int onnx_attr_choice(const Onnx__NodeProto *n, const char *name, const char *const *names,
                     int nnames, int dflt);
rx_status onnx_value_tensor(imp *I, const Onnx__NodeProto *n, const rx_expr *e, rx_dtype dt,
                            rx_node **out);
rx_status onnx_elem_of(imp *I, const Onnx__NodeProto *n, rx_node *t, int k, rx_node **out);

/* import_index.c */
rx_status onnx_iota(imp *I, const Onnx__NodeProto *n, const rx_expr *lo, const rx_expr *hi,
                    rx_node **out);
rx_status onnx_trailing_units(imp *I, const Onnx__NodeProto *n, rx_node *x, int count,
                              rx_node **out);
rx_status onnx_imod(imp *I, const Onnx__NodeProto *n, rx_node *a, const rx_expr *m, rx_node **out);
rx_status onnx_take_at(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_node *idx, int64_t axis,
                       rx_node **out, rx_var **r);
const rx_sinfo *onnx_shaped(imp *I, const Onnx__NodeProto *n, size_t i);
rx_status onnx_gather_grid(imp *I, const Onnx__NodeProto *n, const rx_sinfo *si, rx_node *x,
                           rx_node **idx, rx_var **out);
rx_status onnx_scalar_input(imp *I, const Onnx__NodeProto *n, size_t i, const rx_expr **out);
rx_status onnx_nd_flat_index(imp *I, const Onnx__NodeProto *n, const rx_sinfo *ds,
                             const rx_sinfo *is, int64_t b, int64_t m, rx_node **out,
                             const rx_expr **stride);

/* import_rt.c */
rx_status onnx_rt_cast(imp *I, const Onnx__NodeProto *n, rx_node *x, rx_dtype dt, rx_node **out);

/* ---- the handlers, by file (onnx_ops[] in import.c lists them) ---- */

/* import_elementwise.c */
rx_status onnx_do_clip(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_unary(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_reciprocal(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_binary(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_where(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_matmul(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_gemm(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_cast(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_formula(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_mod(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_variadic(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_cast_like(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_det(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_select_act(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

/* import_reduce.c */
rx_status onnx_do_softmax(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_gelu(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_reduce(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_arg_extreme(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_cumsum(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_hardmax(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_elu(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_act(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_reduce_by(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_prelu(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_leaky_relu(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

/* import_nn.c */
rx_status onnx_do_dropout(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_layer_norm(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_nll_loss(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_instance_norm(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_lrn(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_conv(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_pool(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_conv_transpose(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_global_pool(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_batch_norm(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

/* import_resize.c */
rx_status onnx_do_resize(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_grid_sample(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

/* import_shape.c */
rx_status onnx_do_constant(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_identity(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_shape(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_size(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_squeeze(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_concat(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_reshape_expand(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_reshape(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_transpose(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_depth_space(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_flatten(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

/* import_index.c */
rx_status onnx_do_trilu(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_split(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_slice(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_gather(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_gather_elements(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_range(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_pad(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_tile(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_topk(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_one_hot(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_eye_like(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_gather_nd(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

/* import_scatter.c */
rx_status onnx_do_scatter(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_scatter_nd(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_max_unpool(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_reverse_sequence(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_einsum(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

/* import_signal.c */
rx_status onnx_do_nms(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_dft(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_stft(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_roi_align(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_mel_weight_matrix(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_tfidf(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_window(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

/* import_rt.c */
rx_status onnx_do_squeeze_any(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_reduce_any(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_slice_any(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_range_any(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_nonzero(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_compress(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_unique(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

/* import_control.c */
rx_status onnx_do_if(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_scan(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_loop(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

/* import_quant.c */
rx_status onnx_do_quantize(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_dequantize(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_dynamic_quantize(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_integer_op(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_pow(imp *I, const Onnx__NodeProto *n, const onnx_op *row);
rx_status onnx_do_bitshift(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

/* import_rnn.c */
rx_status onnx_do_rnn(imp *I, const Onnx__NodeProto *n, const onnx_op *row);

#endif
