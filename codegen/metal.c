/* Metal Shading Language: the cg_lang table and hooks. `kernel void NAME(...)` with buffers
 * `device T*` at [[buffer(0..k-1)]] (`device const T*` where only read), the symbolic values
 * in one `constant rx_params&` struct at [[buffer(k)]] (set with setBytes; int fields in ABI
 * order, value i at byte 4 * i), then the builtins. threadgroup arrays are declared at kernel
 * scope. half and bfloat (Metal 3.1); bfloat math goes through float. Subgroup reductions are
 * simd_sum / simd_max / simd_min. MSL has no erf: rx_erf. */
#include "cg_int.h"

static void msl_scalar_ref(cg_printer *p, rx_strbuf *o, const char *name) {
  (void)p;
  base_strbuf_append(o, name);
}

static void msl_shared(cg_printer *p, rx_strbuf *o, const cg_shared *s) {
  cg_indent(p, o);
  base_strbuf_printf(o, "threadgroup %s %s[%lld];\n", p->L->types[s->buf->dtype],
                     cg_name(p, s->name), (long long)(s->elems ? s->elems : 1));
}

static void msl_subgroup(cg_printer *p, rx_strbuf *o, rx_intrinsic op, rx_dtype t, const char *x,
                         const char *mask) {
  static const char *names[] = {"simd_sum", "simd_max", "simd_min"};
  if (op == RX_INTRIN_SHUFFLE_XOR) {
    base_strbuf_printf(o, "simd_shuffle_xor(%s, ushort(%s))", x, mask);
    return;
  }
  if (t == RX_DTYPE_BOOL) {
    cg_error(p, p->ck->loc, "subgroup reduction of bool values is not supported");
    return;
  }
  base_strbuf_printf(o, "%s(%s)", names[op - RX_INTRIN_SUBGROUP_SUM], x);
}

/* A vector of words through a reinterpreted device pointer: `((device const uint4*)x)[i]`. */
static void msl_vector_ref(cg_printer *p, rx_strbuf *o, const rx_karg *a, int words,
                           const char *index, bool store) {
  const char *W = p->L->vec_words[words == 1 ? 0 : words == 2 ? 1 : 2];
  base_strbuf_printf(o, "((device %s%s*)%s)[%s]", store ? "" : "const ", W, cg_name(p, a->name),
                     index);
}

/* Subgroup matrix fragments (ir.h, RX_STMT_FRAG) as simdgroup_matrix<T, Cols, Rows> (Metal
 * Shading Language Specification 3.1, section 6.7 "SIMD-group Matrix Functions"):
 * make_filled_simdgroup_matrix, simdgroup_load / simdgroup_store (elements_per_row: the stride;
 * transpose_matrix: col_major) from device or threadgroup memory, and
 * simdgroup_multiply_accumulate(d, a, b, c). Lowering allows only the shapes of the target's
 * `.mma` table (8x8). */
static void msl_frag(cg_printer *p, rx_strbuf *o, const rx_stmt *s, const cg_frag_ops *f) {
  cg_indent(p, o);
  if (s->kind == RX_STMT_ALLOC) {
    base_strbuf_printf(o, "simdgroup_matrix<%s, %d, %d> %s;\n", f->type, f->cols, f->rows, f->frag);
    return;
  }
  switch (s->frag_op) {
  case RX_FRAG_OP_FILL:
    base_strbuf_printf(o, "%s = make_filled_simdgroup_matrix<%s, %d, %d>(%s);\n", f->frag, f->type,
                       f->cols, f->rows, f->value);
    return;
  case RX_FRAG_OP_MMA:
    base_strbuf_printf(o, "simdgroup_multiply_accumulate(%s, %s, %s, %s);\n", f->frag, f->a, f->b,
                       f->c);
    return;
  case RX_FRAG_OP_LOAD:
  case RX_FRAG_OP_STORE:
    base_strbuf_printf(o, "simdgroup_%s(%s, &%s[%s], (ulong)(%s), ulong2(0, 0), %s);\n",
                       s->frag_op == RX_FRAG_OP_LOAD ? "load" : "store", f->frag, f->mem, f->off,
                       f->stride, s->col_major ? "true" : "false");
    return;
  case RX_FRAG_OP_COUNT:
    break;
  }
  cg_error(p, s->loc, "malformed frag statement");
}

static void msl_open(cg_printer *p, rx_strbuf *o) {
  rx_kernel *k = p->ck->k;
  cg_header_comment(p, o);
  base_strbuf_append(o, "#include <metal_stdlib>\nusing namespace metal;\n");
  int nscal = 0, nbuf = 0;
  for (int i = 0; i < k->nargs; i++) nscal += k->args[i].kind == RX_KARG_SCALAR;
  nbuf = k->nargs - nscal;
  if (nscal) {
    base_strbuf_append(o, "struct rx_params {");
    for (int i = nbuf; i < k->nargs; i++)
      base_strbuf_printf(o, " int %s;", cg_name(p, k->args[i].name));
    base_strbuf_append(o, " };\n");
  }
  if (p->helpers.data) base_strbuf_printf(o, "\n%s", p->helpers.data);
  base_strbuf_printf(o, "\nkernel void %s(", k->name);
  for (int i = 0; i < nbuf; i++) {
    const rx_karg *a = &k->args[i];
    base_strbuf_printf(o, "device %s%s* %s [[buffer(%d)]], ", a->written ? "" : "const ",
                       p->L->types[a->dtype], cg_name(p, a->name), a->binding);
  }
  if (nscal) base_strbuf_printf(o, "constant rx_params& rx_p [[buffer(%d)]], ", nbuf);
  base_strbuf_append(o, "uint3 rx_gid [[threadgroup_position_in_grid]], "
                        "uint3 rx_tid [[thread_position_in_threadgroup]]) {\n");
  for (int i = nbuf; i < k->nargs; i++) {
    const char *n = cg_name(p, k->args[i].name);
    base_strbuf_printf(o, "  const %s %s = rx_p.%s;\n", p->idx, n, n);
  }
}

/* Names a user identifier must not take in the Metal Shading Language (C++14 based), beside
 * cg_cxx_reserved (the C++ keywords, alternative tokens and C library names): the MSL address
 * spaces and function qualifiers, the scalar, vector, packed vector, matrix, atomic and texture
 * types, the attribute names used in
 * [[...]], and the functions of the metal namespace that `using namespace metal` brings in
 * (Metal Shading Language Specification 3.1, chapters 2, 5 and 6: math, integer, geometric,
 * SIMD-group and quad-group functions). */
static const char *const msl_reserved[] = {
    "kernel",
    "vertex",
    "fragment",
    "device",
    "constant",
    "threadgroup",
    "thread",
    "threadgroup_imageblock",
    "ray_data",
    "object_data",
    "visible",
    "stitchable",
    "mesh",
    "object",
    "metal",
    "half",
    "bfloat",
    "uchar",
    "ushort",
    "uint",
    "ulong",
    "array",
    "atomic",
    "atomic_int",
    "atomic_uint",
    "atomic_bool",
    "atomic_float",
    "sampler",
    "texture1d",
    "texture1d_array",
    "texture2d",
    "texture2d_array",
    "texture3d",
    "texturecube",
    "texturecube_array",
    "texture2d_ms",
    "texture2d_ms_array",
    "depth2d",
    "depth2d_array",
    "depthcube",
    "depthcube_array",
    "depth2d_ms",
    "texture_buffer",
    "access",
    "mem_flags",
    "mem_none",
    "mem_device",
    "mem_threadgroup",
    "mem_texture",
    "threadgroup_barrier",
    "simdgroup_barrier",
    "as_type",
    "select",
    "all",
    "any",
    "precise",
    "fast",
    "buffer",
    "position",
    "stage_in",
    "color",
    "function_constant",
    "host_name",
    "max_total_threads_per_threadgroup",
    "thread_position_in_grid",
    "thread_position_in_threadgroup",
    "threadgroup_position_in_grid",
    "threads_per_threadgroup",
    "threads_per_grid",
    "thread_index_in_threadgroup",
    "thread_index_in_simdgroup",
    "simdgroup_index_in_threadgroup",
    "threads_per_simdgroup",
    "simdgroups_per_threadgroup",
    "thread_execution_width",
    "dispatch_threads_per_threadgroup",
    "dispatch_simdgroups_per_threadgroup",
    "quadgroup_index_in_threadgroup",
    "thread_index_in_quadgroup",
    "quadgroups_per_threadgroup",
    "simd_sum",
    "simd_max",
    "simd_min",
    "simd_prod",
    "simd_and",
    "simd_or",
    "simd_xor",
    "simd_shuffle",
    "simd_shuffle_xor",
    "simd_shuffle_up",
    "simd_shuffle_down",
    "simd_shuffle_rotate_up",
    "simd_shuffle_rotate_down",
    "simd_broadcast",
    "simd_broadcast_first",
    "simd_ballot",
    "simd_all",
    "simd_any",
    "simd_is_first",
    "simd_active_threads_mask",
    "simd_vote",
    "simd_prefix_inclusive_sum",
    "simd_prefix_exclusive_sum",
    "simd_prefix_inclusive_product",
    "simd_prefix_exclusive_product",
    "quad_sum",
    "quad_max",
    "quad_min",
    "quad_shuffle",
    "quad_shuffle_xor",
    "quad_broadcast",
    "quad_ballot",
    "quad_all",
    "quad_any",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "ceil",
    "copysign",
    "cos",
    "cosh",
    "cospi",
    "divide",
    "exp",
    "exp10",
    "exp2",
    "fabs",
    "abs",
    "fdim",
    "floor",
    "fma",
    "fmax",
    "fmax3",
    "fmedian3",
    "fmin",
    "fmin3",
    "fmod",
    "fract",
    "frexp",
    "ilogb",
    "isfinite",
    "isinf",
    "isnan",
    "isnormal",
    "isordered",
    "isunordered",
    "ldexp",
    "log",
    "log10",
    "log2",
    "max",
    "max3",
    "median3",
    "min",
    "min3",
    "modf",
    "nextafter",
    "pow",
    "powr",
    "rint",
    "round",
    "rsqrt",
    "sign",
    "signbit",
    "sin",
    "sincos",
    "sinh",
    "sinpi",
    "sqrt",
    "step",
    "tan",
    "tanh",
    "tanpi",
    "trunc",
    "clamp",
    "mix",
    "saturate",
    "smoothstep",
    "absdiff",
    "addsat",
    "clz",
    "ctz",
    "extract_bits",
    "hadd",
    "insert_bits",
    "mad24",
    "madhi",
    "madsat",
    "mul24",
    "mulhi",
    "popcount",
    "reverse_bits",
    "rhadd",
    "rotate",
    "subsat",
    "cross",
    "distance",
    "distance_squared",
    "dot",
    "faceforward",
    "length",
    "length_squared",
    "normalize",
    "reflect",
    "refract",
    "determinant",
    "transpose",
    "erf",
    "bool2",
    "packed_bool2",
    "bool3",
    "packed_bool3",
    "bool4",
    "packed_bool4",
    "char2",
    "packed_char2",
    "char3",
    "packed_char3",
    "char4",
    "packed_char4",
    "uchar2",
    "packed_uchar2",
    "uchar3",
    "packed_uchar3",
    "uchar4",
    "packed_uchar4",
    "short2",
    "packed_short2",
    "short3",
    "packed_short3",
    "short4",
    "packed_short4",
    "ushort2",
    "packed_ushort2",
    "ushort3",
    "packed_ushort3",
    "ushort4",
    "packed_ushort4",
    "int2",
    "packed_int2",
    "int3",
    "packed_int3",
    "int4",
    "packed_int4",
    "uint2",
    "packed_uint2",
    "uint3",
    "packed_uint3",
    "uint4",
    "packed_uint4",
    "long2",
    "packed_long2",
    "long3",
    "packed_long3",
    "long4",
    "packed_long4",
    "ulong2",
    "packed_ulong2",
    "ulong3",
    "packed_ulong3",
    "ulong4",
    "packed_ulong4",
    "half2",
    "packed_half2",
    "half3",
    "packed_half3",
    "half4",
    "packed_half4",
    "bfloat2",
    "packed_bfloat2",
    "bfloat3",
    "packed_bfloat3",
    "bfloat4",
    "packed_bfloat4",
    "float2",
    "packed_float2",
    "float3",
    "packed_float3",
    "float4",
    "packed_float4",
    "half2x2",
    "half2x3",
    "half2x4",
    "half3x2",
    "half3x3",
    "half3x4",
    "half4x2",
    "half4x3",
    "half4x4",
    "float2x2",
    "float2x3",
    "float2x4",
    "float3x2",
    "float3x3",
    "float3x4",
    "float4x2",
    "float4x3",
    "float4x4",
    "bfloat2x2",
    "bfloat2x3",
    "bfloat2x4",
    "bfloat3x2",
    "bfloat3x3",
    "bfloat3x4",
    "bfloat4x2",
    "bfloat4x3",
    "bfloat4x4",
    NULL,
};

const cg_lang cg_metal = {
    .lang = RX_LANG_MSL,
    .types = {[RX_DTYPE_F32] = "float",
              [RX_DTYPE_F16] = "half",
              [RX_DTYPE_BF16] = "bfloat",
              [RX_DTYPE_I64] = "long",
              [RX_DTYPE_I32] = "int",
              [RX_DTYPE_I16] = "short",
              [RX_DTYPE_I8] = "char",
              [RX_DTYPE_U8] = "uchar",
              [RX_DTYPE_BOOL] = "bool",
              /* no f64: Metal has no double (MSL spec 2.1, "Scalar Data Types") */
              [RX_DTYPE_U16] = "ushort",
              [RX_DTYPE_U32] = "uint",
              [RX_DTYPE_U64] = "ulong"},
    .idx32 = "int",
    .idx64 = "long",
    .i64_suffix = "l",
    .u64_suffix = "ul",
    .f64_suffix = "", /* unused: no f64 */
    .f32_suffix = "f",
    .c_casts = true,
    .let_prefix = "const ",
    .thread_idx = {"rx_tid.x", "rx_tid.y", "rx_tid.z"},
    .block_idx = {"rx_gid.x", "rx_gid.y", "rx_gid.z"},
    .barrier = "threadgroup_barrier(mem_flags::mem_threadgroup);",
    .unroll = NULL,
    .fn_prefix = "static inline ",
    .check_buf = "device int*",
    .math = {[RX_INTRIN_EXP] = "exp",
             [RX_INTRIN_EXP2] = "exp2",
             [RX_INTRIN_LOG] = "log",
             [RX_INTRIN_LOG2] = "log2",
             [RX_INTRIN_SQRT] = "sqrt",
             [RX_INTRIN_RSQRT] = "rsqrt",
             [RX_INTRIN_TANH] = "tanh",
             [RX_INTRIN_SIN] = "sin",
             [RX_INTRIN_COS] = "cos",
             [RX_INTRIN_ASIN] = "asin",
             [RX_INTRIN_ACOS] = "acos",
             [RX_INTRIN_ATAN] = "atan",
             [RX_INTRIN_FLOOR] = "floor",
             [RX_INTRIN_CEIL] = "ceil",
             [RX_INTRIN_POW] = "pow",
             [RX_INTRIN_FMA] = "fma",
             [RX_INTRIN_ABS] = "fabs",
             [RX_INTRIN_MIN] = "fmin",
             [RX_INTRIN_MAX] = "fmax"},
    .int_abs = "abs",
    .i64_abs = "abs",
    .int_min = "min",
    .int_max = "max",
    .has_erf = false,
    .to_f32 = {[RX_DTYPE_BF16] = "float(%s)"},
    .from_f32 = {[RX_DTYPE_BF16] = "bfloat(%s)"},
    .arith_via_f32 = {[RX_DTYPE_BF16] = true},
    .vec_words = {"uint", "uint2", "uint4"},
    .from_bits = {[RX_DTYPE_F32] = "as_type<float>(%s)",
                  [RX_DTYPE_F16] = "as_type<half>((ushort)(%s))",
                  [RX_DTYPE_BF16] = "as_type<bfloat>((ushort)(%s))",
                  [RX_DTYPE_I32] = "((int)(%s))",
                  [RX_DTYPE_I16] = "((short)(%s))",
                  [RX_DTYPE_I8] = "((char)(%s))",
                  [RX_DTYPE_U8] = "((uchar)(%s))",
                  [RX_DTYPE_U16] = "((ushort)(%s))",
                  [RX_DTYPE_U32] = "(%s)"},
    .to_bits = {[RX_DTYPE_F32] = "as_type<uint>(%s)",
                [RX_DTYPE_F16] = "((uint)as_type<ushort>(%s))",
                [RX_DTYPE_BF16] = "((uint)as_type<ushort>(%s))",
                [RX_DTYPE_I32] = "((uint)(%s))",
                [RX_DTYPE_I16] = "((uint)(ushort)(%s))",
                [RX_DTYPE_I8] = "((uint)(uchar)(%s))",
                [RX_DTYPE_U8] = "((uint)(%s))",
                [RX_DTYPE_U16] = "((uint)(%s))",
                [RX_DTYPE_U32] = "(%s)"},
    .f32_bits = "as_type<float>(%s)",
    .reserved = msl_reserved,
    .reserved_shared = cg_cxx_reserved,
    .reserved_prefixes = NULL,
    .open_kernel = msl_open,
    .shared_decl = msl_shared,
    .subgroup = msl_subgroup,
    .frag = msl_frag,
    .scalar_ref = msl_scalar_ref,
    .vector_ref = msl_vector_ref,
};
