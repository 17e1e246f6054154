/* frontends/onnx/import_signal.c: the ONNX importer's detection, signal and text operators
 * (ops/signal.c): NonMaxSuppression, DFT, STFT, the Hann, Hamming and Blackman windows,
 * RoiAlign, MelWeightMatrix and TfIdfVectorizer. */
#include "import_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- detection and text features (ops/signal.c) ---- */

/* NonMaxSuppression(boxes, scores, [max_output_boxes_per_class, iou_threshold,
 * score_threshold]): non_max_suppression gives every possible row and the count kept (absent
 * inputs: max 0, iou 0, no score threshold); the count, read back by tensor_to_shape, is a fresh
 * dim k and the result the first k rows. */
/* NonMaxSuppression's max_output_boxes_per_class past this is "no limit" (more boxes than a
 * tensor of i32-indexed rows holds) */
#define NMS_MAX_OUT INT32_MAX

rx_status onnx_do_nms(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  rx_node *a[5];
  int na = 4;
  for (int k = 0; k < 5; k++) {
    val *mo = k == 2 && onnx_input(n, 2) ? onnx_get(I, onnx_input(n, 2)) : NULL;
    if (mo && mo->kind == V_SYM && mo->slen == 1 && mo->s[0]->kind == RX_EXPR_CONST &&
        mo->s[0]->value > NMS_MAX_OUT) {
      /* torchvision exports max_output_boxes_per_class = INT64_MAX ("no limit"): a class keeps
       * at most its N boxes, so any bound past N is the same, and the op counts rows in i32 */
      a[2] = rx_arg_int(I->b, NMS_MAX_OUT);
    } else if (onnx_input(n, (size_t)k)) {
      RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, (size_t)k), &a[k]));
      if (k == 4) na = 5;
    } else if (k < 2) {
      return onnx_node_err(I, n, "input %d (%s) is required", k, k ? "scores" : "boxes");
    } else if (k < 4) {
      a[k] = k == 2 ? rx_arg_int(I->b, 0) : rx_arg_float(I->b, 0.0);
    }
  }
  const rx_attr *at = rx_attr_int(I->m, "center_point_box", onnx_attr_i(n, "center_point_box", 0));
  rx_var *tup, *sel;
  val cnt = {.name = NULL, .kind = V_TENSOR};
  RX_RETURN_IF_ERROR(onnx_emit(I, n, row->op, a, na, &at, 1, &tup));
  RX_RETURN_IF_ERROR(
      onnx_at_node(I, n, rx_emit_get_item(I->b, rx_arg_var(I->b, tup), 0, NULL, &sel)));
  RX_RETURN_IF_ERROR(
      onnx_at_node(I, n, rx_emit_get_item(I->b, rx_arg_var(I->b, tup), 1, NULL, &cnt.var)));
  RX_RETURN_IF_ERROR(onnx_runtime_sym(I, n, &cnt));
  int64_t axis = 0;
  const rx_expr *zero = rx_sym_const(I->m, 0);
  const rx_attr *sa[3] = {rx_attr_ints(I->m, "axes", &axis, 1),
                          rx_attr_exprs(I->m, "begin", &zero, 1),
                          rx_attr_exprs(I->m, "end", &cnt.s[0], 1)};
  rx_node *x = rx_arg_var(I->b, sel);
  rx_var *r;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_strided_slice, &x, 1, sa, 3, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* dft(x, axis, inverse, onesided, length=[L]) of x's value (a tensor node), defining y. */
static rx_status emit_dft(imp *I, const Onnx__NodeProto *n, rx_node *x, int64_t axis, bool inv,
                          bool onesided, const rx_expr *len, rx_var **out) {
  if (inv && onesided)
    return onnx_node_err(I, n, "inverse with onesided (a real inverse transform) is not supported");
  const rx_attr *at[4] = {rx_attr_int(I->m, "axis", axis), rx_attr_bool(I->m, "inverse", inv),
                          rx_attr_bool(I->m, "onesided", onesided),
                          len ? rx_attr_exprs(I->m, "length", &len, 1) : NULL};
  return onnx_emit(I, n, RX_OP_dft, &x, 1, at, len ? 4 : 3, out);
}

/* DFT(x, [dft_length], [axis]): the axis an attribute (default 1) before opset 20, an input
 * (default -2) from it; dft_length a constant or bound at run time. */
rx_status onnx_do_dft(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  rx_node *x;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  const rx_expr *len = NULL, *ax = NULL;
  if (onnx_input(n, 1)) RX_RETURN_IF_ERROR(onnx_scalar_input(I, n, 1, &len));
  int64_t axis = onnx_attr_i(n, "axis", 1);
  if (I->opset >= 20) {
    axis = -2;
    if (onnx_input(n, 2)) {
      RX_RETURN_IF_ERROR(onnx_scalar_input(I, n, 2, &ax));
      if (ax->kind != RX_EXPR_CONST)
        return onnx_node_err(I, n, "input 2 (axis) must be a constant");
      axis = ax->value;
    }
  }
  rx_var *r;
  RX_RETURN_IF_ERROR(emit_dft(I, n, x, axis, onnx_attr_i(n, "inverse", 0) != 0,
                              onnx_attr_i(n, "onesided", 0) != 0, len, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* STFT(signal [B, T, c], frame_step, [window [W]], [frame_length]): the frames signal[:, f step
 * + w] (f < (T - W) // step + 1) gathered by one take, times the window, and a dft of length W
 * along the frame axis: [B, F, K, 2]. */
rx_status onnx_do_stft(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_sinfo *si = onnx_shaped(I, n, 0), *wi = onnx_input(n, 2) ? onnx_shaped(I, n, 2) : NULL;
  if (!si || si->ndim != 3)
    return onnx_node_err(I, n, "expects a signal [B, T, 1 or 2] of known shape");
  if (onnx_input(n, 2) && (!wi || wi->ndim != 1))
    return onnx_node_err(I, n, "the window must be 1-D of known length");
  const rx_expr *step, *W = wi ? wi->shape[0] : NULL;
  RX_RETURN_IF_ERROR(onnx_scalar_input(I, n, 1, &step));
  if (!W && onnx_input(n, 3)) RX_RETURN_IF_ERROR(onnx_scalar_input(I, n, 3, &W));
  if (!W) return onnx_node_err(I, n, "needs a window or a frame_length");
  if ((step->kind == RX_EXPR_CONST && step->value < 1) ||
      (W->kind == RX_EXPR_CONST && W->value < 1))
    return onnx_node_err(I, n, "frame_step and the frame length must be positive");
  const rx_expr *F = rx_sym_add(
      I->m, rx_sym_floordiv(I->m, rx_sym_sub(I->m, si->shape[1], W), step), rx_sym_const(I->m, 1));
  rx_node *fi, *wv, *x, *a[2];
  rx_var *r;
  RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), F, &fi));
  a[0] = fi;
  a[1] = rx_arg_prim(I->b, RX_DTYPE_I64, step);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_multiply, a, 2, NULL, 0, &r));
  RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, rx_arg_var(I->b, r), 1, &fi));
  RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), W, &wv));
  a[0] = fi;
  a[1] = wv;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_add, a, 2, NULL, 0, &r));
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  RX_RETURN_IF_ERROR(onnx_take_at(I, n, x, rx_arg_var(I->b, r), 1, &x, &r));
  if (wi) {
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 2), &a[1]));
    RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, a[1], 1, &a[1]));
    a[0] = x;
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_multiply, a, 2, NULL, 0, &r));
    x = rx_arg_var(I->b, r);
  }
  RX_RETURN_IF_ERROR(emit_dft(I, n, x, 2, false, onnx_attr_i(n, "onesided", 1) != 0, W, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* A string attribute's value in buf (at most size - 1 bytes; dflt when absent); false when it
 * does not fit. */
static bool str_attr(const Onnx__NodeProto *n, const char *name, const char *dflt, char *buf,
                     size_t size) {
  const Onnx__AttributeProto *a = onnx_attr(n, name);
  if (!a || !a->has_s) {
    snprintf(buf, size, "%s", dflt);
    return true;
  }
  if (a->s.len >= size) return false;
  memcpy(buf, a->s.data, a->s.len);
  buf[a->s.len] = 0;
  return true;
}

/* RoiAlign(X, rois, batch_indices): roi_align; coordinate_transformation_mode (opset 16, default
 * half_pixel; before it the regions are not shifted, output_half_pixel). */
rx_status onnx_do_roi_align(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  char mode[8], ctm[24];
  if (!str_attr(n, "mode", "avg", mode, sizeof mode) ||
      (strcmp(mode, "avg") && strcmp(mode, "max")))
    return onnx_node_err(I, n, "mode must be avg or max");
  if (!str_attr(n, "coordinate_transformation_mode",
                I->opset >= 16 ? "half_pixel" : "output_half_pixel", ctm, sizeof ctm) ||
      (strcmp(ctm, "half_pixel") && strcmp(ctm, "output_half_pixel")))
    return onnx_node_err(I, n,
                         "coordinate_transformation_mode must be half_pixel or output_half_pixel");
  rx_node *a[3];
  for (int k = 0; k < 3; k++) RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, (size_t)k), &a[k]));
  const rx_attr *at[6] = {
      rx_attr_int(I->m, "output_height", onnx_attr_i(n, "output_height", 1)),
      rx_attr_int(I->m, "output_width", onnx_attr_i(n, "output_width", 1)),
      rx_attr_int(I->m, "sampling_ratio", onnx_attr_i(n, "sampling_ratio", 0)),
      rx_attr_float(I->m, "spatial_scale", onnx_attr_f(n, "spatial_scale", 1.0)),
      rx_attr_str(I->m, "mode", mode),
      rx_attr_bool(I->m, "half_pixel", !strcmp(ctm, "half_pixel"))};
  rx_var *r;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, row->op, a, 3, at, 6, &r));
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* op(a, b) (b NULL: op(a)) as a new node. */
static rx_status op2(imp *I, const Onnx__NodeProto *n, rx_op_id op, rx_node *a, rx_node *b,
                     rx_node **out) {
  rx_node *args[2] = {a, b};
  rx_var *r;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, op, args, b ? 2 : 1, NULL, 0, &r));
  *out = rx_arg_var(I->b, r);
  return NULL;
}

/* Input i (or node x when given) cast to f32; a 0-d input as [1] (the programs of 0-d
 * elementwise ops have no loop to place in a kernel). */
static rx_status as_f32(imp *I, const Onnx__NodeProto *n, size_t i, rx_node *x, rx_node **out) {
  rx_var *r;
  if (!x) {
    RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, i), &x));
    if (x->sinfo && (x->sinfo->kind == RX_SINFO_PRIM ||
                     (x->sinfo->kind == RX_SINFO_TENSOR && x->sinfo->ndim == 0))) {
      int64_t ax = 0;
      const rx_attr *ea = rx_attr_ints(I->m, "axes", &ax, 1);
      RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_expand_dims, &x, 1, &ea, 1, &r));
      x = rx_arg_var(I->b, r);
    }
  }
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, &x, 1, &at, 1, &r));
  *out = rx_arg_var(I->b, r);
  return NULL;
}

/* The mel-scale edges of MelWeightMatrix as spectrogram bins: floor((dft_length + 1) *
 * 700 (10^((t step + low) / 2595) - 1) / sample_rate) at t = bins + off (f32 [M]). */
static rx_status mel_edges(imp *I, const Onnx__NodeProto *n, rx_node *bins, double off,
                           rx_node *step, rx_node *low, rx_node *len1, rx_node *rate,
                           rx_node **out) {
  const double ln10 = 2.302585092994046;
  rx_node *t;
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_add, bins, rx_arg_float(I->b, off), &t));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_multiply, t, step, &t));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_add, t, low, &t));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_multiply, t, rx_arg_float(I->b, ln10 / 2595.0), &t));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_exp, t, NULL, &t));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_subtract, t, rx_arg_float(I->b, 1.0), &t));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_multiply, t, rx_arg_float(I->b, 700.0), &t));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_multiply, t, len1, &t));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_divide, t, rate, &t));
  return op2(I, n, RX_OP_floor, t, NULL, out);
}

/* MelWeightMatrix(num_mel_bins M, dft_length L, sample_rate, lower_edge_hertz,
 * upper_edge_hertz) as ONNX's reference: [L / 2 + 1, M] (M and L constants or bound at run
 * time), column i rising from its lower edge to 1 at its center and falling to its upper edge
 * (f32 math; output_datatype casts the result). */
rx_status onnx_do_mel_weight_matrix(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  (void)row;
  const rx_expr *M, *L;
  RX_RETURN_IF_ERROR(onnx_scalar_input(I, n, 0, &M));
  RX_RETURN_IF_ERROR(onnx_scalar_input(I, n, 1, &L));
  rx_dtype odt = RX_DTYPE_F32;
  if (onnx_attr(n, "output_datatype") &&
      !onnx_dtype_of((int32_t)onnx_attr_i(n, "output_datatype", 1), &odt))
    return onnx_node_err(I, n, "unsupported output_datatype");
  const double ln10 = 2.302585092994046;
  rx_node *mf, *len1, *rate, *edge[2], *bins, *j, *e[3], *t, *u, *w;
  RX_RETURN_IF_ERROR(as_f32(I, n, 0, NULL, &mf));
  RX_RETURN_IF_ERROR(as_f32(I, n, 1, NULL, &len1));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_add, len1, rx_arg_float(I->b, 1.0), &len1));
  RX_RETURN_IF_ERROR(as_f32(I, n, 2, NULL, &rate));
  for (int k = 0; k < 2; k++) { /* 2595 log10(1 + hz / 700) */
    RX_RETURN_IF_ERROR(as_f32(I, n, (size_t)(3 + k), NULL, &t));
    RX_RETURN_IF_ERROR(op2(I, n, RX_OP_divide, t, rx_arg_float(I->b, 700.0), &t));
    RX_RETURN_IF_ERROR(op2(I, n, RX_OP_add, t, rx_arg_float(I->b, 1.0), &t));
    RX_RETURN_IF_ERROR(op2(I, n, RX_OP_log, t, NULL, &t));
    RX_RETURN_IF_ERROR(op2(I, n, RX_OP_multiply, t, rx_arg_float(I->b, 2595.0 / ln10), &edge[k]));
  }
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_subtract, edge[1], edge[0], &t));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_add, mf, rx_arg_float(I->b, 2.0), &u));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_divide, t, u, &t)); /* the step: over M + 2 points */
  rx_var *r;
  RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), M, &bins));
  RX_RETURN_IF_ERROR(as_f32(I, n, 0, bins, &bins));
  for (int k = 0; k < 3; k++)
    RX_RETURN_IF_ERROR(mel_edges(I, n, bins, k, t, edge[0], len1, rate, &e[k]));
  const rx_expr *S =
      rx_sym_add(I->m, rx_sym_floordiv(I->m, L, rx_sym_const(I->m, 2)), rx_sym_const(I->m, 1));
  RX_RETURN_IF_ERROR(onnx_iota(I, n, rx_sym_const(I->m, 0), S, &j));
  RX_RETURN_IF_ERROR(as_f32(I, n, 0, j, &j));
  RX_RETURN_IF_ERROR(onnx_trailing_units(I, n, j, 1, &j));
  /* rising: (j - lo) / (c - lo) on [lo, c], or 1 at c where lo == c */
  rx_node *lc, *a, *b, *in;
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_subtract, e[1], e[0], &lc));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_subtract, j, e[0], &a));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_divide, a, lc, &a));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_greater_equal, j, e[0], &in));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_less_equal, j, e[1], &b));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_logical_and, in, b, &in));
  rx_node *args[3] = {in, a, rx_arg_float(I->b, 0.0)};
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_where, args, 3, NULL, 0, &r));
  w = rx_arg_var(I->b, r);
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_equal, j, e[1], &b));
  RX_RETURN_IF_ERROR(as_f32(I, n, 0, b, &b));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_equal, lc, rx_arg_float(I->b, 0.0), &in));
  args[0] = in, args[1] = b, args[2] = w;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_where, args, 3, NULL, 0, &r));
  w = rx_arg_var(I->b, r);
  /* falling: (hi - j) / (hi - c) on [c, hi) */
  rx_node *ch;
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_subtract, e[2], e[1], &ch));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_subtract, e[2], j, &a));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_divide, a, ch, &a));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_greater_equal, j, e[1], &in));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_less, j, e[2], &b));
  RX_RETURN_IF_ERROR(op2(I, n, RX_OP_logical_and, in, b, &in));
  args[0] = in, args[1] = a, args[2] = w;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_where, args, 3, NULL, 0, &r));
  w = rx_arg_var(I->b, r);
  if (odt != RX_DTYPE_F32) {
    const rx_attr *at = rx_attr_dtype(I->m, "dtype", odt);
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, &w, 1, &at, 1, &r));
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* The f32 vector of v[0..count) as a tensor: full([1], v_k) per value joined by concat. */
static rx_status float_vector(imp *I, const Onnx__NodeProto *n, const float *v, int count,
                              rx_node **out) {
  const rx_expr *one = rx_sym_const(I->m, 1);
  const rx_attr *dt = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
  rx_node **parts = base_calloc((size_t)count, sizeof *parts);
  rx_status s = NULL;
  rx_var *r = NULL;
  for (int k = 0; k < count && !s; k++) {
    rx_node *a[2] = {rx_arg_shape(I->b, &one, 1), rx_arg_float(I->b, v[k])};
    s = onnx_emit(I, n, RX_OP_full, a, 2, &dt, 1, &r);
    if (!s) parts[k] = rx_arg_var(I->b, r);
  }
  if (!s && count > 1) {
    rx_var *tup;
    s = onnx_at_node(I, n, rx_emit_tuple(I->b, parts, count, NULL, &tup));
    rx_node *a = s ? NULL : rx_arg_var(I->b, tup);
    const rx_attr *ax = rx_attr_int(I->m, "axis", 0);
    if (!s) s = onnx_emit(I, n, RX_OP_concat, &a, 1, &ax, 1, &r);
  }
  free(parts);
  if (!s) *out = rx_arg_var(I->b, r);
  return s;
}

/* TfIdfVectorizer over integer n-grams: tfidf gives the counts (TF); IDF is weights (or 1)
 * where a count is positive, TFIDF the counts times the weights. */
rx_status onnx_do_tfidf(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  const Onnx__AttributeProto *pool = onnx_attr(n, "pool_int64s"),
                             *counts = onnx_attr(n, "ngram_counts"),
                             *idx = onnx_attr(n, "ngram_indexes"), *mode = onnx_attr(n, "mode"),
                             *w = onnx_attr(n, "weights");
  if (!pool || !pool->n_ints)
    return onnx_node_err(I, n,
                         "needs pool_int64s (string pools are not supported: relaxc has no "
                         "string tensors)");
  if (!counts || !idx || !mode || !mode->has_s)
    return onnx_node_err(I, n, "needs the ngram_counts, ngram_indexes and mode attributes");
  char md[8] = {0};
  if (mode->s.len >= sizeof md) return onnx_node_err(I, n, "unknown mode");
  memcpy(md, mode->s.data, mode->s.len);
  if (strcmp(md, "TF") && strcmp(md, "IDF") && strcmp(md, "TFIDF"))
    return onnx_node_err(I, n, "unknown mode '%s' (TF, IDF or TFIDF)", md);
  if (pool->n_ints > INT32_MAX || counts->n_ints > INT32_MAX || idx->n_ints > INT32_MAX)
    return onnx_node_err(I, n, "the pool is too large");
  rx_node *x;
  RX_RETURN_IF_ERROR(onnx_arg(I, n, onnx_input(n, 0), &x));
  const rx_attr *at[6] = {rx_attr_ints(I->m, "pool", pool->ints, (int)pool->n_ints),
                          rx_attr_ints(I->m, "counts", counts->ints, (int)counts->n_ints),
                          rx_attr_ints(I->m, "indexes", idx->ints, (int)idx->n_ints),
                          rx_attr_int(I->m, "min_gram", onnx_attr_i(n, "min_gram_length", 1)),
                          rx_attr_int(I->m, "max_gram", onnx_attr_i(n, "max_gram_length", 1)),
                          rx_attr_int(I->m, "max_skip", onnx_attr_i(n, "max_skip_count", 0))};
  rx_var *r;
  RX_RETURN_IF_ERROR(onnx_emit(I, n, row->op, &x, 1, at, 6, &r));
  bool weighted = w && w->n_floats > 0;
  if (!strcmp(md, "TF") || (!strcmp(md, "TFIDF") && !weighted)) {
    onnx_def_tensor(I, n, r);
    return NULL;
  }
  const rx_sinfo *si = rx_var_sinfo(r);
  if (weighted && (si->ndim < 1 || !si->shape || si->shape[si->ndim - 1]->kind != RX_EXPR_CONST ||
                   si->shape[si->ndim - 1]->value != (int64_t)w->n_floats))
    return onnx_node_err(I, n, "weights must have one value per output index");
  rx_node *a[3] = {rx_arg_var(I->b, r), rx_arg_float(I->b, 0.0), NULL}, *wv = NULL;
  if (weighted) RX_RETURN_IF_ERROR(float_vector(I, n, w->floats, (int)w->n_floats, &wv));
  if (!strcmp(md, "TFIDF")) {
    a[1] = wv;
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_multiply, a, 2, NULL, 0, &r));
  } else {
    rx_var *pos;
    RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_greater, a, 2, NULL, 0, &pos));
    a[0] = rx_arg_var(I->b, pos);
    const rx_attr *ca = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
    if (weighted) {
      a[1] = wv;
      a[2] = rx_arg_float(I->b, 0.0);
      RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_where, a, 3, NULL, 0, &r));
    } else {
      RX_RETURN_IF_ERROR(onnx_emit(I, n, RX_OP_cast, a, 1, &ca, 1, &r));
    }
  }
  onnx_def_tensor(I, n, r);
  return NULL;
}

/* HannWindow, HammingWindow, BlackmanWindow (row->form: ONNX_FORM_hann, hamming, blackman): a0 - a1
 * cos(2 pi i / N') + a2 cos(4 pi i / N') for i < size, N' = size (periodic, the default) or size
 * - 1; size a constant, a shape value or bound at run time; in output_datatype (default f32). */
rx_status onnx_do_window(imp *I, const Onnx__NodeProto *n, const onnx_op *row) {
  double a0 = 0.5, a1 = 0.5, a2 = 0;
  if (row->form == ONNX_FORM_hamming) a0 = 25.0 / 46, a1 = 21.0 / 46;
  if (row->form == ONNX_FORM_blackman) a0 = 0.42, a2 = 0.08;
  rx_dtype dt;
  if (!onnx_dtype_of((int32_t)onnx_attr_i(n, "output_datatype", 1), &dt) ||
      !(ir_dtype_is_float(dt) || ir_dtype_is_int(dt)))
    return onnx_node_err(I, n, "output_datatype %lld is not a numeric dtype of relaxc",
                         (long long)onnx_attr_i(n, "output_datatype", 1));
  const rx_expr *size, *den;
  RX_RETURN_IF_ERROR(onnx_scalar_input(I, n, 0, &size));
  den = onnx_attr_i(n, "periodic", 1) ? size : rx_sym_sub(I->m, size, rx_sym_const(I->m, 1));
  rx_var *r;
  rx_node *i, *dn, *ang, *y, *c;
  rx_node *a[2] = {I64(rx_sym_const(I->m, 0)), I64(size)};
  const rx_attr *at = rx_attr_dtype(I->m, "dtype", RX_DTYPE_F32);
  RX_RETURN_IF_ERROR(onnx_exa(I, n, RX_OP_arange, a, 2, &at, 1, &i, NULL));
  RX_RETURN_IF_ERROR(onnx_value_tensor(I, n, den, RX_DTYPE_F32, &dn));
  EX2(RX_OP_multiply, i, FL(2 * 3.14159265358979323846), ang);
  EX2(RX_OP_divide, ang, dn, ang);
  EX1(RX_OP_cos, ang, c);
  EX2(RX_OP_multiply, c, FL(-a1), y);
  EX2(RX_OP_add, y, FL(a0), y);
  if (a2 != 0) {
    EX2(RX_OP_multiply, ang, FL(2), c);
    EX1(RX_OP_cos, c, c);
    EX2(RX_OP_multiply, c, FL(a2), c);
    EX2(RX_OP_add, y, c, y);
  }
  if (dt != RX_DTYPE_F32) RX_RETURN_IF_ERROR(onnx_rt_cast(I, n, y, dt, &y));
  onnx_def_tensor(I, n, y->var);
  return NULL;
}
