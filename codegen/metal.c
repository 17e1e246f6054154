/* Metal Shading Language: the cg_lang table and hooks. `kernel void NAME(...)` with buffers
 * `device T*` at [[buffer(0..k-1)]] (`device const T*` where only read), the symbolic values
 * in one `constant NAME_params&` struct at [[buffer(k)]] (set with setBytes; int fields in ABI
 * order, value i at byte 4 * i), then the builtins. threadgroup arrays are declared at kernel
 * scope. half and bfloat (Metal 3.1); bfloat math goes through float. Subgroup reductions are
 * simd_sum / simd_max / simd_min. MSL has no erf: rx_erf. */
#include "cg_int.h"

static void msl_scalar_ref(cg_printer *p, rx_strbuf *o, const char *name) {
  (void)p;
  rx_strbuf_append(o, name);
}

static void msl_shared(cg_printer *p, rx_strbuf *o, const cg_shared *s) {
  cg_indent(p, o);
  rx_strbuf_printf(o, "threadgroup %s %s[%lld];\n", p->L->types[s->buf->dtype],
                   cg_name(p, s->name), (long long)(s->elems ? s->elems : 1));
}

static void msl_subgroup(cg_printer *p, rx_strbuf *o, rx_intrinsic op, rx_dtype t,
                         const char *x) {
  static const char *names[] = {"simd_sum", "simd_max", "simd_min"};
  if (t == RX_DTYPE_BOOL) {
    cg_error(p, p->ck->loc, "subgroup reduction of bool values is not supported");
    return;
  }
  rx_strbuf_printf(o, "%s(%s)", names[op - RX_INTRIN_SUBGROUP_SUM], x);
}

static void msl_open(cg_printer *p, rx_strbuf *o) {
  rx_kernel *k = p->ck->k;
  cg_header_comment(p, o);
  rx_strbuf_append(o, "#include <metal_stdlib>\nusing namespace metal;\n");
  int nscal = 0, nbuf = 0;
  for (int i = 0; i < k->nargs; i++) nscal += k->args[i].kind == RX_KARG_SCALAR;
  nbuf = k->nargs - nscal;
  if (nscal) {
    rx_strbuf_printf(o, "struct %s_params {", k->name);
    for (int i = nbuf; i < k->nargs; i++) rx_strbuf_printf(o, " int %s;", cg_name(p, k->args[i].name));
    rx_strbuf_append(o, " };\n");
  }
  if (p->helpers.data) rx_strbuf_printf(o, "\n%s", p->helpers.data);
  rx_strbuf_printf(o, "\nkernel void %s(", k->name);
  for (int i = 0; i < nbuf; i++) {
    const rx_karg *a = &k->args[i];
    rx_strbuf_printf(o, "device %s%s* %s [[buffer(%d)]], ", a->written ? "" : "const ",
                     p->L->types[a->dtype], cg_name(p, a->name), a->binding);
  }
  if (nscal) rx_strbuf_printf(o, "constant %s_params& rx_p [[buffer(%d)]], ", k->name, nbuf);
  rx_strbuf_append(o, "uint3 rx_gid [[threadgroup_position_in_grid]], "
                      "uint3 rx_tid [[thread_position_in_threadgroup]]) {\n");
  for (int i = nbuf; i < k->nargs; i++) {
    const char *n = cg_name(p, k->args[i].name);
    rx_strbuf_printf(o, "  const %s %s = rx_p.%s;\n", p->idx, n, n);
  }
}

const cg_lang cg_metal = {
    .lang = RX_LANG_MSL,
    .types = {[RX_DTYPE_F32] = "float", [RX_DTYPE_F16] = "half", [RX_DTYPE_BF16] = "bfloat",
              [RX_DTYPE_I64] = "long", [RX_DTYPE_I32] = "int", [RX_DTYPE_I16] = "short",
              [RX_DTYPE_I8] = "char", [RX_DTYPE_U8] = "uchar", [RX_DTYPE_BOOL] = "bool"},
    .idx32 = "int",
    .idx64 = "long",
    .i64_suffix = "l",
    .f32_suffix = "f",
    .c_casts = true,
    .let_prefix = "const ",
    .thread_idx = {"rx_tid.x", "rx_tid.y", "rx_tid.z"},
    .block_idx = {"rx_gid.x", "rx_gid.y", "rx_gid.z"},
    .barrier = "threadgroup_barrier(mem_flags::mem_threadgroup);",
    .unroll = NULL,
    .fn_prefix = "static inline ",
    .math = {[RX_INTRIN_EXP] = "exp", [RX_INTRIN_EXP2] = "exp2", [RX_INTRIN_LOG] = "log",
             [RX_INTRIN_LOG2] = "log2", [RX_INTRIN_SQRT] = "sqrt", [RX_INTRIN_RSQRT] = "rsqrt",
             [RX_INTRIN_TANH] = "tanh", [RX_INTRIN_SIN] = "sin", [RX_INTRIN_COS] = "cos",
             [RX_INTRIN_FLOOR] = "floor", [RX_INTRIN_CEIL] = "ceil", [RX_INTRIN_POW] = "pow",
             [RX_INTRIN_FMA] = "fma", [RX_INTRIN_ABS] = "fabs", [RX_INTRIN_MIN] = "fmin",
             [RX_INTRIN_MAX] = "fmax"},
    .int_abs = "abs",
    .i64_abs = "abs",
    .int_min = "min",
    .int_max = "max",
    .has_erf = false,
    .to_f32 = {[RX_DTYPE_BF16] = "float(%s)"},
    .from_f32 = {[RX_DTYPE_BF16] = "bfloat(%s)"},
    .arith_via_f32 = {[RX_DTYPE_BF16] = true},
    .f32_bits = "as_type<float>(%s)",
    .open_kernel = msl_open,
    .shared_decl = msl_shared,
    .subgroup = msl_subgroup,
    .scalar_ref = msl_scalar_ref,
};
