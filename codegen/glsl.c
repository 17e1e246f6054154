/* GLSL 450 compute for Vulkan: the cg_lang table and hooks. Buffers are std430 storage
 * buffers at set 0, bindings 0..k-1 (readonly where only read); symbolic values an int
 * push-constant block (std430, 4 bytes each) when they fit min(128, target push-constant
 * bytes), else a std140 uniform buffer at binding k holding `ivec4 v[(count + 3) / 4]`, so
 * value i is at byte 4 * i either way. Shared allocations are file-scope `shared` arrays.
 * f16 is float16_t (GL_EXT_shader_16bit_storage + explicit arithmetic types); bool buffers are
 * bytes (uint8_t); bf16, which GLSL lacks, is its 16 bits in a uint16_t, computed in float
 * (arith_via_f32, as CUDA does) through base_bf16_to_f32 and base_f32_to_bf16 (below: round to
 * nearest even, a NaN as 0x7fc0, as ONNX's float32_to_bfloat16). Subgroup reductions are
 * subgroupAdd/Max/Min (GL_KHR_shader_subgroup_arithmetic). GLSL has no erf: rx_erf. */
#include "cg_int.h"

#include <stdio.h>

static void glsl_scalar_ref(cg_printer *p, rx_strbuf *o, const char *name) {
  (void)p;
  base_strbuf_append(o, name);
}

static void glsl_subgroup(cg_printer *p, rx_strbuf *o, rx_intrinsic op, rx_dtype t, const char *x,
                          const char *mask) {
  static const char *names[] = {"subgroupAdd", "subgroupMax", "subgroupMin"};
  p->need[CG_NEED_SUBGROUP] = true;
  if (op == RX_INTRIN_SHUFFLE_XOR) { /* GL_KHR_shader_subgroup_shuffle; bf16: its bits move */
    p->need[CG_NEED_SHUFFLE] = true;
    base_strbuf_printf(o, "subgroupShuffleXor(%s, uint(%s))", x, mask);
    return;
  }
  if (t == RX_DTYPE_BOOL || t == RX_DTYPE_BF16) { /* bf16: its bits, a uint16_t */
    cg_error(p, p->ck->loc, "subgroup reduction of %s values is not supported in GLSL",
             ir_dtype_name(t));
    return;
  }
  base_strbuf_printf(o, "%s(%s)", names[op - RX_INTRIN_SUBGROUP_SUM], x);
}

/* Subgroup matrix fragments (ir.h, RX_STMT_FRAG) as GL_NV_cooperative_matrix's
 * fcoopmatNV<BITS, gl_ScopeSubgroup, ROWS, COLS> (GLSL extension GL_NV_cooperative_matrix; SPIR-V
 * SPV_NV_cooperative_matrix): a constructor from one scalar fills it, coopMatLoadNV /
 * coopMatStoreNV(m, array, element, stride, colMajor) from a storage buffer or shared array of
 * the element type (element and stride in elements), coopMatMulAddNV(a, b, c). Lowering allows
 * only the shapes of the target's `.mma` table (vulkan-nvidia); the runtime checks the device's
 * VK_NV_cooperative_matrix. GL_KHR_cooperative_matrix would need glslang 13 (targets.c). */
static void glsl_frag(cg_printer *p, rx_strbuf *o, const rx_stmt *s, const cg_frag_ops *f) {
  p->need[CG_NEED_COOPMAT] = true;
  char T[96];
  snprintf(T, sizeof T, "fcoopmatNV<%d, gl_ScopeSubgroup, %d, %d>", ir_dtype_bits(s->buf->dtype),
           f->rows, f->cols);
  cg_indent(p, o);
  if (s->kind == RX_STMT_ALLOC) {
    base_strbuf_printf(o, "%s %s;\n", T, f->frag);
    return;
  }
  switch (s->frag_op) {
  case RX_FRAG_OP_FILL:
    base_strbuf_printf(o, "%s = %s(%s);\n", f->frag, T, f->value);
    return;
  case RX_FRAG_OP_MMA:
    base_strbuf_printf(o, "%s = coopMatMulAddNV(%s, %s, %s);\n", f->frag, f->a, f->b, f->c);
    return;
  case RX_FRAG_OP_LOAD:
  case RX_FRAG_OP_STORE:
    base_strbuf_printf(o, "coopMat%sNV(%s, %s, uint(%s), uint(%s), %s);\n",
                       s->frag_op == RX_FRAG_OP_LOAD ? "Load" : "Store", f->frag, f->mem, f->off,
                       f->stride, s->col_major ? "true" : "false");
    return;
  case RX_FRAG_OP_COUNT:
    break;
  }
  cg_error(p, s->loc, "malformed frag statement");
}

/* Vector access goes through views: the same storage buffer declared again at its binding as an
 * array of uint / uvec2 / uvec4 (std430 strides 4, 8, 16), declared in glsl_open for the word
 * counts used (cg_printer.views). Aliasing declarations of one binding are allowed by SPIR-V
 * and Vulkan (both are storage-buffer descriptors); a written buffer with views is not
 * `restrict`, since it is then reached through more than one variable. */
static void glsl_view_name(rx_strbuf *o, int binding, int words) {
  base_strbuf_printf(o, "rx_b%d_w%d", binding, words);
}

static void glsl_vector_ref(cg_printer *p, rx_strbuf *o, const rx_karg *a, int words,
                            const char *index, bool store) {
  (void)p;
  (void)store;
  glsl_view_name(o, a->binding, words);
  base_strbuf_printf(o, "[%s]", index);
}

static void glsl_views(cg_printer *p, rx_strbuf *o, const rx_karg *a, int i) {
  for (int w = 0; w < 3; w++) {
    if (!(p->views[i] >> w & 1u)) continue;
    base_strbuf_printf(o, "layout(std430, set = 0, binding = %d) %s%sbuffer rx_buf%d_w%d { %s ",
                       a->binding, a->written ? "" : "readonly ", a->written ? "" : "restrict ",
                       a->binding, 1 << w, p->L->vec_words[w]);
    glsl_view_name(o, a->binding, 1 << w);
    base_strbuf_append(o, "[]; };\n");
  }
}

static void glsl_open(cg_printer *p, rx_strbuf *o) {
  rx_kernel *k = p->ck->k;
  const bool *u = p->uses;
  cg_header_comment(p, o);
  base_strbuf_append(o, "#version 450\n");
  bool i8 = u[RX_DTYPE_I8] || u[RX_DTYPE_U8] || u[RX_DTYPE_BOOL];
  bool i16 = u[RX_DTYPE_I16] || u[RX_DTYPE_U16] || u[RX_DTYPE_BF16],
       i64 = u[RX_DTYPE_I64] || u[RX_DTYPE_U64];
  if (u[RX_DTYPE_F16] || i16)
    base_strbuf_append(o, "#extension GL_EXT_shader_16bit_storage : require\n");
  if (i8) base_strbuf_append(o, "#extension GL_EXT_shader_8bit_storage : require\n");
  if (u[RX_DTYPE_F16])
    base_strbuf_append(o, "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n");
  if (u[RX_DTYPE_F64]) /* double is core in 4.50; this gives its conversions from the types above */
    base_strbuf_append(o, "#extension GL_EXT_shader_explicit_arithmetic_types_float64 : require\n");
  if (i64)
    base_strbuf_append(o, "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n");
  if (i16)
    base_strbuf_append(o, "#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require\n");
  if (i8)
    base_strbuf_append(o, "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n");
  if (p->need[CG_NEED_UNROLL])
    base_strbuf_append(o, "#extension GL_EXT_control_flow_attributes : require\n");
  if (p->need[CG_NEED_COOPMAT])
    base_strbuf_append(o, "#extension GL_KHR_memory_scope_semantics : require\n"
                          "#extension GL_NV_cooperative_matrix : require\n");
  if (p->need[CG_NEED_SHUFFLE])
    base_strbuf_append(o, "#extension GL_KHR_shader_subgroup_shuffle : require\n");
  if (p->need[CG_NEED_SUBGROUP]) {
    base_strbuf_append(o, "#extension GL_KHR_shader_subgroup_arithmetic : require\n");
    if (u[RX_DTYPE_F16])
      base_strbuf_append(o, "#extension GL_EXT_shader_subgroup_extended_types_float16 : require\n");
    if (i64)
      base_strbuf_append(o, "#extension GL_EXT_shader_subgroup_extended_types_int64 : require\n");
    if (i16)
      base_strbuf_append(o, "#extension GL_EXT_shader_subgroup_extended_types_int16 : require\n");
    if (i8)
      base_strbuf_append(o, "#extension GL_EXT_shader_subgroup_extended_types_int8 : require\n");
  }
  base_strbuf_printf(o, "\nlayout(local_size_x = %d, local_size_y = %d, local_size_z = %d) in;\n",
                     k->block[0], k->block[1], k->block[2]);
  int nscal = 0;
  for (int i = 0; i < k->nargs; i++) {
    const rx_karg *a = &k->args[i];
    if (a->kind != RX_KARG_BUFFER) {
      nscal++;
      continue;
    }
    const char *T = p->L->storage[a->dtype] ? p->L->storage[a->dtype] : p->L->types[a->dtype];
    bool aliased = a->written && p->views[i];
    base_strbuf_printf(o,
                       "layout(std430, set = 0, binding = %d) %s%sbuffer rx_buf%d { %s %s[]; };\n",
                       a->binding, a->written ? "" : "readonly ", aliased ? "" : "restrict ",
                       a->binding, T, cg_name(p, a->name));
    glsl_views(p, o, a, i);
  }
  int nbuf = k->nargs - nscal;
  if (nscal && !k->uses_ubo) {
    base_strbuf_append(o, "layout(push_constant, std430) uniform rx_push {");
    for (int i = nbuf; i < k->nargs; i++)
      base_strbuf_printf(o, " int %s;", cg_name(p, k->args[i].name));
    base_strbuf_append(o, " } rx_pc;\n");
  } else if (nscal) {
    base_strbuf_printf(
        o, "layout(std140, set = 0, binding = %d) uniform rx_ubo { ivec4 v[%d]; } rx_ub;\n", nbuf,
        (nscal + 3) / 4);
  }
  for (int i = 0; i < p->ck->nshared; i++) {
    const cg_shared *s = &p->ck->shared[i];
    base_strbuf_printf(o, "shared %s %s[%lld];\n", p->L->types[s->buf->dtype], cg_name(p, s->name),
                       (long long)(s->elems ? s->elems : 1));
  }
  if (u[RX_DTYPE_BF16])
    base_strbuf_append(
        o, "\nfloat rx_bf16_to_f32(uint16_t h) { return uintBitsToFloat(uint(h) << 16); "
           "}\n"
           "uint16_t rx_f32_to_bf16(float f) {\n"
           "  uint u = floatBitsToUint(f);\n"
           "  if (isnan(f)) return uint16_t(0x7fc0u);\n"
           "  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"
           "}\n");
  if (p->helpers.data) base_strbuf_printf(o, "\n%s", p->helpers.data);
  base_strbuf_printf(o, "\nvoid %s() {\n", tgt_target_kind_entry(RX_TARGET_VULKAN));
  for (int i = nbuf; i < k->nargs; i++) {
    const char *n = cg_name(p, k->args[i].name);
    int j = i - nbuf;
    rx_strbuf v = {0};
    if (k->uses_ubo)
      base_strbuf_printf(&v, "rx_ub.v[%d].%c", j / 4, "xyzw"[j % 4]);
    else
      base_strbuf_printf(&v, "rx_pc.%s", n);
    /* widened by halves as rx_i64 (cprinter.c): lavapipe miscompiles comparisons of int64_t(x) */
    if (k->index64)
      base_strbuf_printf(o, "  const %s %s = packInt2x32(ivec2(%s, %s >> 31));\n", p->idx, n,
                         v.data, v.data);
    else
      base_strbuf_printf(o, "  const %s %s = %s;\n", p->idx, n, v.data);
    base_strbuf_free(&v);
  }
}

/* Names a user identifier must not take in GLSL 4.50 for Vulkan: the keywords and the words
 * reserved for future use (GLSL 4.50 spec 3.6: common, partition, active, input, output,
 * filter, cast, ...), the opaque types of GL_KHR_vulkan_glsl, the explicit arithmetic types of
 * the GL_EXT_shader_explicit_arithmetic_types extensions, and the built-in functions (GLSL 4.50
 * chapter 8, GL_KHR_shader_subgroup). Identifiers starting with "gl_" are reserved (3.7). */
static const char *const glsl_reserved[] = {
    "const",
    "uniform",
    "buffer",
    "shared",
    "attribute",
    "varying",
    "coherent",
    "volatile",
    "restrict",
    "readonly",
    "writeonly",
    "atomic_uint",
    "layout",
    "centroid",
    "flat",
    "smooth",
    "noperspective",
    "patch",
    "sample",
    "invariant",
    "precise",
    "break",
    "continue",
    "do",
    "for",
    "while",
    "switch",
    "case",
    "default",
    "if",
    "else",
    "subroutine",
    "in",
    "out",
    "inout",
    "int",
    "void",
    "bool",
    "true",
    "false",
    "float",
    "double",
    "discard",
    "return",
    "vec2",
    "vec3",
    "vec4",
    "ivec2",
    "ivec3",
    "ivec4",
    "bvec2",
    "bvec3",
    "bvec4",
    "uint",
    "uvec2",
    "uvec3",
    "uvec4",
    "dvec2",
    "dvec3",
    "dvec4",
    "mat2",
    "mat3",
    "mat4",
    "mat2x2",
    "mat2x3",
    "mat2x4",
    "mat3x2",
    "mat3x3",
    "mat3x4",
    "mat4x2",
    "mat4x3",
    "mat4x4",
    "dmat2",
    "dmat3",
    "dmat4",
    "dmat2x2",
    "dmat2x3",
    "dmat2x4",
    "dmat3x2",
    "dmat3x3",
    "dmat3x4",
    "dmat4x2",
    "dmat4x3",
    "dmat4x4",
    "lowp",
    "mediump",
    "highp",
    "precision",
    "struct",
    "common",
    "partition",
    "active",
    "asm",
    "class",
    "union",
    "enum",
    "typedef",
    "template",
    "this",
    "resource",
    "goto",
    "inline",
    "noinline",
    "public",
    "static",
    "extern",
    "external",
    "interface",
    "long",
    "short",
    "half",
    "fixed",
    "unsigned",
    "superp",
    "input",
    "output",
    "hvec2",
    "hvec3",
    "hvec4",
    "fvec2",
    "fvec3",
    "fvec4",
    "sampler3DRect",
    "filter",
    "sizeof",
    "cast",
    "namespace",
    "using",
    "main",
    "demote",
    "terminateInvocation",
    "int8_t",
    "int16_t",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "float16_t",
    "float32_t",
    "float64_t",
    "sampler",
    "samplerShadow",
    "subpassInput",
    "isubpassInput",
    "usubpassInput",
    "subpassInputMS",
    "isubpassInputMS",
    "usubpassInputMS",
    "accelerationStructureEXT",
    "rayQueryEXT",
    "radians",
    "degrees",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "pow",
    "exp",
    "log",
    "exp2",
    "log2",
    "sqrt",
    "inversesqrt",
    "abs",
    "sign",
    "floor",
    "trunc",
    "round",
    "roundEven",
    "ceil",
    "fract",
    "mod",
    "modf",
    "min",
    "max",
    "clamp",
    "mix",
    "step",
    "smoothstep",
    "isnan",
    "isinf",
    "floatBitsToInt",
    "floatBitsToUint",
    "intBitsToFloat",
    "uintBitsToFloat",
    "fma",
    "frexp",
    "ldexp",
    "packUnorm2x16",
    "packSnorm2x16",
    "packUnorm4x8",
    "packSnorm4x8",
    "unpackUnorm2x16",
    "unpackSnorm2x16",
    "unpackUnorm4x8",
    "unpackSnorm4x8",
    "packHalf2x16",
    "unpackHalf2x16",
    "packDouble2x32",
    "unpackDouble2x32",
    "packInt2x32",
    "unpackInt2x32",
    "packUint2x32",
    "unpackUint2x32",
    "packFloat2x16",
    "unpackFloat2x16",
    "doubleBitsToInt64",
    "doubleBitsToUint64",
    "int64BitsToDouble",
    "uint64BitsToDouble",
    "float16BitsToInt16",
    "float16BitsToUint16",
    "int16BitsToFloat16",
    "uint16BitsToFloat16",
    "length",
    "distance",
    "dot",
    "cross",
    "normalize",
    "faceforward",
    "reflect",
    "refract",
    "matrixCompMult",
    "outerProduct",
    "transpose",
    "determinant",
    "inverse",
    "lessThan",
    "lessThanEqual",
    "greaterThan",
    "greaterThanEqual",
    "equal",
    "notEqual",
    "any",
    "all",
    "not",
    "uaddCarry",
    "usubBorrow",
    "umulExtended",
    "imulExtended",
    "bitfieldExtract",
    "bitfieldInsert",
    "bitfieldReverse",
    "bitCount",
    "findLSB",
    "findMSB",
    "textureSize",
    "textureQueryLod",
    "textureQueryLevels",
    "textureSamples",
    "texture",
    "textureProj",
    "textureLod",
    "textureOffset",
    "texelFetch",
    "texelFetchOffset",
    "textureProjOffset",
    "textureLodOffset",
    "textureProjLod",
    "textureProjLodOffset",
    "textureGrad",
    "textureGradOffset",
    "textureProjGrad",
    "textureProjGradOffset",
    "textureGather",
    "textureGatherOffset",
    "textureGatherOffsets",
    "atomicCounterIncrement",
    "atomicCounterDecrement",
    "atomicCounter",
    "atomicAdd",
    "atomicMin",
    "atomicMax",
    "atomicAnd",
    "atomicOr",
    "atomicXor",
    "atomicExchange",
    "atomicCompSwap",
    "imageSize",
    "imageSamples",
    "imageLoad",
    "imageStore",
    "imageAtomicAdd",
    "imageAtomicMin",
    "imageAtomicMax",
    "imageAtomicAnd",
    "imageAtomicOr",
    "imageAtomicXor",
    "imageAtomicExchange",
    "imageAtomicCompSwap",
    "EmitStreamVertex",
    "EndStreamPrimitive",
    "EmitVertex",
    "EndPrimitive",
    "dFdx",
    "dFdy",
    "dFdxFine",
    "dFdyFine",
    "dFdxCoarse",
    "dFdyCoarse",
    "fwidth",
    "fwidthFine",
    "fwidthCoarse",
    "interpolateAtCentroid",
    "interpolateAtSample",
    "interpolateAtOffset",
    "noise1",
    "noise2",
    "noise3",
    "noise4",
    "barrier",
    "memoryBarrier",
    "memoryBarrierAtomicCounter",
    "memoryBarrierBuffer",
    "memoryBarrierShared",
    "memoryBarrierImage",
    "groupMemoryBarrier",
    "subpassLoad",
    "subgroupBarrier",
    "subgroupMemoryBarrier",
    "subgroupMemoryBarrierBuffer",
    "subgroupMemoryBarrierShared",
    "subgroupMemoryBarrierImage",
    "subgroupElect",
    "subgroupAll",
    "subgroupAny",
    "subgroupAllEqual",
    "subgroupBroadcast",
    "subgroupBroadcastFirst",
    "subgroupBallot",
    "subgroupInverseBallot",
    "subgroupBallotBitExtract",
    "subgroupBallotBitCount",
    "subgroupBallotInclusiveBitCount",
    "subgroupBallotExclusiveBitCount",
    "subgroupBallotFindLSB",
    "subgroupBallotFindMSB",
    "subgroupShuffle",
    "subgroupShuffleXor",
    "subgroupShuffleUp",
    "subgroupShuffleDown",
    "subgroupAdd",
    "subgroupMul",
    "subgroupMin",
    "subgroupMax",
    "subgroupAnd",
    "subgroupOr",
    "subgroupXor",
    "subgroupInclusiveAdd",
    "subgroupInclusiveMul",
    "subgroupInclusiveMin",
    "subgroupInclusiveMax",
    "subgroupInclusiveAnd",
    "subgroupInclusiveOr",
    "subgroupInclusiveXor",
    "subgroupExclusiveAdd",
    "subgroupExclusiveMul",
    "subgroupExclusiveMin",
    "subgroupExclusiveMax",
    "subgroupExclusiveAnd",
    "subgroupExclusiveOr",
    "subgroupExclusiveXor",
    "subgroupClusteredAdd",
    "subgroupClusteredMul",
    "subgroupClusteredMin",
    "subgroupClusteredMax",
    "subgroupClusteredAnd",
    "subgroupClusteredOr",
    "subgroupClusteredXor",
    "subgroupQuadBroadcast",
    "subgroupQuadSwapHorizontal",
    "subgroupQuadSwapVertical",
    "subgroupQuadSwapDiagonal",
    "sampler1D",
    "image1D",
    "texture1D",
    "sampler2D",
    "image2D",
    "texture2D",
    "sampler3D",
    "image3D",
    "texture3D",
    "samplerCube",
    "imageCube",
    "textureCube",
    "sampler1DArray",
    "image1DArray",
    "texture1DArray",
    "sampler2DArray",
    "image2DArray",
    "texture2DArray",
    "sampler2DRect",
    "image2DRect",
    "texture2DRect",
    "samplerBuffer",
    "imageBuffer",
    "textureBuffer",
    "sampler2DMS",
    "image2DMS",
    "texture2DMS",
    "sampler2DMSArray",
    "image2DMSArray",
    "texture2DMSArray",
    "samplerCubeArray",
    "imageCubeArray",
    "textureCubeArray",
    "isampler1D",
    "iimage1D",
    "itexture1D",
    "isampler2D",
    "iimage2D",
    "itexture2D",
    "isampler3D",
    "iimage3D",
    "itexture3D",
    "isamplerCube",
    "iimageCube",
    "itextureCube",
    "isampler1DArray",
    "iimage1DArray",
    "itexture1DArray",
    "isampler2DArray",
    "iimage2DArray",
    "itexture2DArray",
    "isampler2DRect",
    "iimage2DRect",
    "itexture2DRect",
    "isamplerBuffer",
    "iimageBuffer",
    "itextureBuffer",
    "isampler2DMS",
    "iimage2DMS",
    "itexture2DMS",
    "isampler2DMSArray",
    "iimage2DMSArray",
    "itexture2DMSArray",
    "isamplerCubeArray",
    "iimageCubeArray",
    "itextureCubeArray",
    "usampler1D",
    "uimage1D",
    "utexture1D",
    "usampler2D",
    "uimage2D",
    "utexture2D",
    "usampler3D",
    "uimage3D",
    "utexture3D",
    "usamplerCube",
    "uimageCube",
    "utextureCube",
    "usampler1DArray",
    "uimage1DArray",
    "utexture1DArray",
    "usampler2DArray",
    "uimage2DArray",
    "utexture2DArray",
    "usampler2DRect",
    "uimage2DRect",
    "utexture2DRect",
    "usamplerBuffer",
    "uimageBuffer",
    "utextureBuffer",
    "usampler2DMS",
    "uimage2DMS",
    "utexture2DMS",
    "usampler2DMSArray",
    "uimage2DMSArray",
    "utexture2DMSArray",
    "usamplerCubeArray",
    "uimageCubeArray",
    "utextureCubeArray",
    "sampler1DShadow",
    "sampler2DShadow",
    "samplerCubeShadow",
    "sampler1DArrayShadow",
    "sampler2DArrayShadow",
    "sampler2DRectShadow",
    "samplerCubeArrayShadow",
    "i8vec2",
    "i8vec3",
    "i8vec4",
    "u8vec2",
    "u8vec3",
    "u8vec4",
    "i16vec2",
    "i16vec3",
    "i16vec4",
    "u16vec2",
    "u16vec3",
    "u16vec4",
    "i32vec2",
    "i32vec3",
    "i32vec4",
    "u32vec2",
    "u32vec3",
    "u32vec4",
    "i64vec2",
    "i64vec3",
    "i64vec4",
    "u64vec2",
    "u64vec3",
    "u64vec4",
    "f16vec2",
    "f16vec3",
    "f16vec4",
    "f32vec2",
    "f32vec3",
    "f32vec4",
    "f64vec2",
    "f64vec3",
    "f64vec4",
    "f16mat2",
    "f16mat2x2",
    "f16mat2x3",
    "f16mat2x4",
    "f16mat3",
    "f16mat3x2",
    "f16mat3x3",
    "f16mat3x4",
    "f16mat4",
    "f16mat4x2",
    "f16mat4x3",
    "f16mat4x4",
    "f32mat2",
    "f32mat2x2",
    "f32mat2x3",
    "f32mat2x4",
    "f32mat3",
    "f32mat3x2",
    "f32mat3x3",
    "f32mat3x4",
    "f32mat4",
    "f32mat4x2",
    "f32mat4x3",
    "f32mat4x4",
    "f64mat2",
    "f64mat2x2",
    "f64mat2x3",
    "f64mat2x4",
    "f64mat3",
    "f64mat3x2",
    "f64mat3x3",
    "f64mat3x4",
    "f64mat4",
    "f64mat4x2",
    "f64mat4x3",
    "f64mat4x4",
    NULL,
};
static const char *const glsl_reserved_prefixes[] = {"gl_", NULL};

const cg_lang cg_glsl = {
    .lang = RX_LANG_GLSL,
    .types = {[RX_DTYPE_F32] = "float",
              [RX_DTYPE_F16] = "float16_t",
              [RX_DTYPE_I64] = "int64_t",
              [RX_DTYPE_I32] = "int",
              [RX_DTYPE_I16] = "int16_t",
              [RX_DTYPE_I8] = "int8_t",
              [RX_DTYPE_U8] = "uint8_t",
              [RX_DTYPE_BOOL] = "bool",
              [RX_DTYPE_F64] = "double", /* core GLSL 4.00; the device's shaderFloat64 */
              [RX_DTYPE_U16] = "uint16_t",
              [RX_DTYPE_U32] = "uint",
              [RX_DTYPE_U64] = "uint64_t",
              [RX_DTYPE_BF16] = "uint16_t"}, /* its bits: computed in float */
    .storage = {[RX_DTYPE_BOOL] = "uint8_t"},
    .idx32 = "int",
    .idx64 = "int64_t",
    .i64_suffix = "l",
    .u64_suffix = "ul",
    .f64_suffix = "lf",
    .f32_suffix = "f",
    .c_casts = false,
    .i64_by_halves = true,
    .let_prefix = "const ",
    .thread_idx = {"gl_LocalInvocationID.x", "gl_LocalInvocationID.y", "gl_LocalInvocationID.z"},
    .block_idx = {"gl_WorkGroupID.x", "gl_WorkGroupID.y", "gl_WorkGroupID.z"},
    .barrier = "barrier();",
    .unroll = "[[unroll]]", /* GL_EXT_control_flow_attributes: SPIR-V's Unroll loop control */
    .fn_prefix = "",
    .math = {[RX_INTRIN_EXP] = "exp",
             [RX_INTRIN_EXP2] = "exp2",
             [RX_INTRIN_LOG] = "log",
             [RX_INTRIN_LOG2] = "log2",
             [RX_INTRIN_SQRT] = "sqrt",
             [RX_INTRIN_RSQRT] = "inversesqrt",
             [RX_INTRIN_TANH] = "tanh",
             [RX_INTRIN_SIN] = "sin",
             [RX_INTRIN_COS] = "cos",
             [RX_INTRIN_ACOS] = "acos",
             [RX_INTRIN_ATAN] = "atan",
             [RX_INTRIN_FLOOR] = "floor",
             [RX_INTRIN_CEIL] = "ceil",
             [RX_INTRIN_POW] = "pow",
             [RX_INTRIN_FMA] = "fma",
             [RX_INTRIN_ABS] = "abs",
             [RX_INTRIN_MIN] = "min",
             [RX_INTRIN_MAX] = "max"},
    /* the builtins GLSL has for double (GLSL 4.60 8.1-8.3: no exp, exp2, log, log2, tanh, sin,
     * cos, pow in double): those compute an f64 in f32 (f32 precision) */
    .math_f64 = {[RX_INTRIN_SQRT] = "sqrt",
                 [RX_INTRIN_RSQRT] = "inversesqrt",
                 [RX_INTRIN_FLOOR] = "floor",
                 [RX_INTRIN_CEIL] = "ceil",
                 [RX_INTRIN_FMA] = "fma",
                 [RX_INTRIN_ABS] = "abs",
                 [RX_INTRIN_MIN] = "min",
                 [RX_INTRIN_MAX] = "max"},
    .int_abs = "abs",
    .i64_abs = "abs",
    .int_min = "min",
    .int_max = "max",
    .has_erf = false,
    .to_f32 = {[RX_DTYPE_BF16] = "rx_bf16_to_f32(%s)"},
    .from_f32 = {[RX_DTYPE_BF16] = "rx_f32_to_bf16(%s)"},
    .arith_via_f32 = {[RX_DTYPE_BF16] = true},
    .vec_words = {"uint", "uvec2", "uvec4"},
    .from_bits = {[RX_DTYPE_F32] = "uintBitsToFloat(%s)",
                  [RX_DTYPE_F16] = "unpackFloat2x16(%s).x",
                  [RX_DTYPE_I32] = "int(%s)",
                  [RX_DTYPE_U32] = "(%s)"},
    .to_bits = {[RX_DTYPE_F32] = "floatBitsToUint(%s)",
                [RX_DTYPE_F16] = "packFloat2x16(f16vec2(%s, float16_t(0.0)))",
                [RX_DTYPE_I32] = "uint(%s)",
                [RX_DTYPE_U32] = "(%s)"},
    .f32_bits = "uintBitsToFloat(%s)",
    .subscript64 = "uint(%s)",
    .reserved = glsl_reserved,
    .reserved_prefixes = glsl_reserved_prefixes,
    .open_kernel = glsl_open,
    .shared_decl = NULL,
    .subgroup = glsl_subgroup,
    .frag = glsl_frag,
    .scalar_ref = glsl_scalar_ref,
    .vector_ref = glsl_vector_ref,
};
