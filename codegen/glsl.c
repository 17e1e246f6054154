/* GLSL 450 compute for Vulkan: the cg_lang table and hooks. Buffers are std430 storage
 * buffers at set 0, bindings 0..k-1 (readonly where only read); symbolic values an int
 * push-constant block (std430, 4 bytes each) when they fit min(128, target push-constant
 * bytes), else a std140 uniform buffer at binding k holding `ivec4 v[(count + 3) / 4]`, so
 * value i is at byte 4 * i either way. Shared allocations are file-scope `shared` arrays.
 * f16 is float16_t (GL_EXT_shader_16bit_storage + explicit arithmetic types); bool buffers are
 * bytes (uint8_t); bf16 has no GLSL type and is rejected. Subgroup reductions are
 * subgroupAdd/Max/Min (GL_KHR_shader_subgroup_arithmetic). GLSL has no erf: rx_erf. */
#include "cg_int.h"

static void glsl_scalar_ref(cg_printer *p, rx_strbuf *o, const char *name) {
  (void)p;
  rx_strbuf_append(o, name);
}

static void glsl_subgroup(cg_printer *p, rx_strbuf *o, rx_intrinsic op, rx_dtype t,
                          const char *x) {
  static const char *names[] = {"subgroupAdd", "subgroupMax", "subgroupMin"};
  p->need[CG_NEED_SUBGROUP] = true;
  if (t == RX_DTYPE_BOOL) {
    cg_error(p, p->ck->loc, "subgroup reduction of bool values is not supported");
    return;
  }
  rx_strbuf_printf(o, "%s(%s)", names[op - RX_INTRIN_SUBGROUP_SUM], x);
}

static void glsl_open(cg_printer *p, rx_strbuf *o) {
  rx_kernel *k = p->ck->k;
  const bool *u = p->uses;
  cg_header_comment(p, o);
  rx_strbuf_append(o, "#version 450\n");
  bool i8 = u[RX_DTYPE_I8] || u[RX_DTYPE_U8] || u[RX_DTYPE_BOOL];
  if (u[RX_DTYPE_F16] || u[RX_DTYPE_I16])
    rx_strbuf_append(o, "#extension GL_EXT_shader_16bit_storage : require\n");
  if (i8) rx_strbuf_append(o, "#extension GL_EXT_shader_8bit_storage : require\n");
  if (u[RX_DTYPE_F16])
    rx_strbuf_append(o, "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n");
  if (u[RX_DTYPE_I64])
    rx_strbuf_append(o, "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n");
  if (u[RX_DTYPE_I16])
    rx_strbuf_append(o, "#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require\n");
  if (i8) rx_strbuf_append(o, "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n");
  if (p->need[CG_NEED_SUBGROUP]) {
    rx_strbuf_append(o, "#extension GL_KHR_shader_subgroup_arithmetic : require\n");
    if (u[RX_DTYPE_F16])
      rx_strbuf_append(o, "#extension GL_EXT_shader_subgroup_extended_types_float16 : require\n");
    if (u[RX_DTYPE_I64])
      rx_strbuf_append(o, "#extension GL_EXT_shader_subgroup_extended_types_int64 : require\n");
    if (u[RX_DTYPE_I16])
      rx_strbuf_append(o, "#extension GL_EXT_shader_subgroup_extended_types_int16 : require\n");
    if (i8) rx_strbuf_append(o, "#extension GL_EXT_shader_subgroup_extended_types_int8 : require\n");
  }
  rx_strbuf_printf(o, "\nlayout(local_size_x = %d, local_size_y = %d, local_size_z = %d) in;\n",
                   k->block[0], k->block[1], k->block[2]);
  int nscal = 0;
  for (int i = 0; i < k->nargs; i++) {
    const rx_karg *a = &k->args[i];
    if (a->kind != RX_KARG_BUFFER) {
      nscal++;
      continue;
    }
    const char *T = p->L->storage[a->dtype] ? p->L->storage[a->dtype] : p->L->types[a->dtype];
    rx_strbuf_printf(o, "layout(std430, set = 0, binding = %d) %srestrict buffer rx_buf%d { %s %s[]; };\n",
                     a->binding, a->written ? "" : "readonly ", a->binding, T,
                     cg_name(p, a->name));
  }
  int nbuf = k->nargs - nscal;
  if (nscal && !k->uses_ubo) {
    rx_strbuf_append(o, "layout(push_constant, std430) uniform rx_push {");
    for (int i = nbuf; i < k->nargs; i++) rx_strbuf_printf(o, " int %s;", cg_name(p, k->args[i].name));
    rx_strbuf_append(o, " } rx_pc;\n");
  } else if (nscal) {
    rx_strbuf_printf(o, "layout(std140, set = 0, binding = %d) uniform rx_ubo { ivec4 v[%d]; } rx_ub;\n",
                     nbuf, (nscal + 3) / 4);
  }
  for (int i = 0; i < p->ck->nshared; i++) {
    const cg_shared *s = &p->ck->shared[i];
    rx_strbuf_printf(o, "shared %s %s[%lld];\n", p->L->types[s->buf->dtype], cg_name(p, s->name),
                     (long long)(s->elems ? s->elems : 1));
  }
  if (p->helpers.data) rx_strbuf_printf(o, "\n%s", p->helpers.data);
  rx_strbuf_append(o, "\nvoid main() {\n");
  for (int i = nbuf; i < k->nargs; i++) {
    const char *n = cg_name(p, k->args[i].name);
    int j = i - nbuf;
    rx_strbuf_printf(o, "  const %s %s = ", p->idx, n);
    if (k->index64) rx_strbuf_append(o, "int64_t(");
    if (k->uses_ubo)
      rx_strbuf_printf(o, "rx_ub.v[%d].%c", j / 4, "xyzw"[j % 4]);
    else
      rx_strbuf_printf(o, "rx_pc.%s", n);
    rx_strbuf_append(o, k->index64 ? ");\n" : ";\n");
  }
}

const cg_lang cg_glsl = {
    .lang = RX_LANG_GLSL,
    .types = {[RX_DTYPE_F32] = "float", [RX_DTYPE_F16] = "float16_t", [RX_DTYPE_I64] = "int64_t",
              [RX_DTYPE_I32] = "int", [RX_DTYPE_I16] = "int16_t", [RX_DTYPE_I8] = "int8_t",
              [RX_DTYPE_U8] = "uint8_t", [RX_DTYPE_BOOL] = "bool"},
    .storage = {[RX_DTYPE_BOOL] = "uint8_t"},
    .idx32 = "int",
    .idx64 = "int64_t",
    .i64_suffix = "l",
    .f32_suffix = "f",
    .c_casts = false,
    .let_prefix = "const ",
    .thread_idx = {"gl_LocalInvocationID.x", "gl_LocalInvocationID.y", "gl_LocalInvocationID.z"},
    .block_idx = {"gl_WorkGroupID.x", "gl_WorkGroupID.y", "gl_WorkGroupID.z"},
    .barrier = "barrier();",
    .unroll = NULL,
    .fn_prefix = "",
    .math = {[RX_INTRIN_EXP] = "exp", [RX_INTRIN_EXP2] = "exp2", [RX_INTRIN_LOG] = "log",
             [RX_INTRIN_LOG2] = "log2", [RX_INTRIN_SQRT] = "sqrt",
             [RX_INTRIN_RSQRT] = "inversesqrt", [RX_INTRIN_TANH] = "tanh",
             [RX_INTRIN_SIN] = "sin", [RX_INTRIN_COS] = "cos", [RX_INTRIN_FLOOR] = "floor",
             [RX_INTRIN_CEIL] = "ceil", [RX_INTRIN_POW] = "pow", [RX_INTRIN_FMA] = "fma",
             [RX_INTRIN_ABS] = "abs", [RX_INTRIN_MIN] = "min", [RX_INTRIN_MAX] = "max"},
    .int_abs = "abs",
    .i64_abs = "abs",
    .int_min = "min",
    .int_max = "max",
    .has_erf = false,
    .f32_bits = "uintBitsToFloat(%s)",
    .subscript64 = "uint(%s)",
    .open_kernel = glsl_open,
    .shared_decl = NULL,
    .subgroup = glsl_subgroup,
    .scalar_ref = glsl_scalar_ref,
};
