/* CUDA C: the cg_lang table and hooks. Kernels are `extern "C" __global__` with
 * `__launch_bounds__(threads per block)`, buffers as `T* __restrict__` (const where read
 * only), symbolic values as `int` parameters after them (docs/kernel-abi.md). f16 uses the
 * __half operators of cuda_fp16.h; bf16 computes in float (cuda_bf16.h). Subgroup reductions
 * are butterflies of __shfl_xor_sync over the warp (block sizes a multiple of 32, or one
 * power-of-two partial warp with its exact mask). Matrix units and subgroup matrix fragments go
 * through the helper preludes of codegen/mma_cuda.h. */
#include "cg_int.h"
#include "mma_cuda.h"

#include <stdio.h>
#include <string.h>

static void cuda_scalar_ref(cg_printer *p, rx_strbuf *o, const char *name) {
  if (p->ck->k->index64)
    base_strbuf_printf(o, "((long long)%s)", name);
  else
    base_strbuf_append(o, name);
}

static void cuda_shared(cg_printer *p, rx_strbuf *o, const cg_shared *s) {
  cg_indent(p, o);
  /* dynamic shared memory, or the static pool of buffers that reuse storage, at the offsets of
   * lower.c */
  if (p->ck->uses_wgmma || p->ck->shared_pool) {
    const char *pool = p->ck->uses_wgmma ? "rx_dyn_smem" : "rx_smem";
    if (s == &p->ck->shared[0] && p->ck->uses_wgmma) {
      base_strbuf_append(o, "extern __shared__ __align__(1024) unsigned char rx_dyn_smem[];\n");
      cg_indent(p, o);
    } else if (s == &p->ck->shared[0]) {
      base_strbuf_printf(o, "__shared__ __align__(16) unsigned char rx_smem[%lld];\n",
                         (long long)p->ck->k->shared_bytes);
      cg_indent(p, o);
    }
    const char *ty = p->L->types[s->buf->dtype];
    base_strbuf_printf(o, "%s *const %s = (%s *)(%s + %lld);\n", ty, cg_name(p, s->name), ty, pool,
                       (long long)s->offset);
    return;
  }
  /* every array starts at a 16-byte boundary: cp.async and ldmatrix move 16-byte rows, and
   * vectorized loops read and write shared memory 16 bytes at a time (cuda_shared_vector_ref) */
  base_strbuf_printf(o, "__shared__ __align__(16) %s %s[%lld];\n", p->L->types[s->buf->dtype],
                     cg_name(p, s->name), (long long)(s->elems ? s->elems : 1));
}

/* One butterfly helper per (operation, type), overloaded by type. */
static void cuda_subgroup(cg_printer *p, rx_strbuf *o, rx_intrinsic op, rx_dtype t, const char *x,
                          const char *lanes) {
  static const char *names[] = {"rx_subgroup_sum", "rx_subgroup_max", "rx_subgroup_min"};
  int which = op - RX_INTRIN_SUBGROUP_SUM;
  int n = p->ck->nthreads, width;
  if (n % 32 == 0)
    width = 32;
  else if (n < 32 && (n & (n - 1)) == 0)
    width = n;
  else {
    cg_error(p, p->ck->loc,
             "kernel '%s': a warp reduction needs a block of a multiple of 32 threads or a "
             "power of two below 32 (it has %d)",
             p->ck->k->name, n);
    return;
  }
  if (op == RX_INTRIN_SHUFFLE_XOR) { /* __half and __nv_bfloat16 have overloads of their own */
    base_strbuf_printf(o, "__shfl_xor_sync(0x%08xu, %s, %s, %d)",
                       width == 32 ? 0xffffffffu : (1u << width) - 1u, x, lanes, width);
    return;
  }
  int key = CG_NEED_SG_SUM + which;
  /* one type per operation is enough in practice; more types get their own overloads */
  char tag[64];
  snprintf(tag, sizeof tag, "/* %s %s */", names[which], p->L->types[t]);
  if (!p->helpers.data || !strstr(p->helpers.data, tag)) {
    p->need[key] = true;
    const char *T = p->L->types[t];
    bool half = t == RX_DTYPE_F16 || t == RX_DTYPE_BF16;
    const char *comb;
    if (t == RX_DTYPE_F32)
      comb = which == 0 ? "x + y" : which == 1 ? "fmaxf(x, y)" : "fminf(x, y)";
    else if (t == RX_DTYPE_F64)
      comb = which == 0 ? "x + y" : which == 1 ? "fmax(x, y)" : "fmin(x, y)";
    else if (t == RX_DTYPE_F16)
      comb = which == 0 ? "x + y" : which == 1 ? "__hmax(x, y)" : "__hmin(x, y)";
    else if (t == RX_DTYPE_BF16)
      comb = which == 0   ? "__float2bfloat16(__bfloat162float(x) + __bfloat162float(y))"
             : which == 1 ? "__float2bfloat16(fmaxf(__bfloat162float(x), __bfloat162float(y)))"
                          : "__float2bfloat16(fminf(__bfloat162float(x), __bfloat162float(y)))";
    else
      comb = which == 0 ? "x + y" : which == 1 ? "max(x, y)" : "min(x, y)";
    const char *to = t == RX_DTYPE_F16 ? "__half2float" : "__bfloat162float";
    const char *from = t == RX_DTYPE_F16 ? "__float2half" : "__float2bfloat16";
    unsigned mask = width == 32 ? 0xffffffffu : (1u << width) - 1u;
    base_strbuf_printf(&p->helpers,
                       "%s\nstatic __device__ __forceinline__ %s %s(%s x) {\n#pragma unroll\n"
                       "  for (int o = %d; o > 0; o >>= 1) {\n",
                       tag, T, names[which], T, width / 2);
    if (half)
      base_strbuf_printf(&p->helpers, "    %s y = %s(__shfl_xor_sync(0x%08xu, %s(x), o, %d));\n", T,
                         from, mask, to, width);
    else
      base_strbuf_printf(&p->helpers, "    %s y = __shfl_xor_sync(0x%08xu, x, o, %d);\n", T, mask,
                         width);
    base_strbuf_printf(&p->helpers, "    x = %s;\n  }\n  return x;\n}\n", comb);
  }
  base_strbuf_printf(o, "%s(%s)", names[which], x);
}

/* A vector of words through a reinterpreted pointer: `((const uint4*)x)[i]` is one 128-bit load
 * (ld.global.nc.v4.u32 for a read-only __restrict__ buffer). */
static void cuda_vector_ref(cg_printer *p, rx_strbuf *o, const rx_karg *a, int words,
                            const char *index, bool store) {
  const char *W = p->L->vec_words[words == 1 ? 0 : words == 2 ? 1 : 2];
  base_strbuf_printf(o, "((%s%s*)%s)[%s]", store ? "" : "const ", W, cg_name(p, a->name), index);
}

/* The same over a shared array (cuda_shared declares every one 16-byte aligned): one ld.shared.v4
 * or st.shared.v4, whose four quarter-warp phases of 8 lanes meet no bank conflict where the 8
 * lanes read 128 contiguous bytes. */
static void cuda_shared_vector_ref(cg_printer *p, rx_strbuf *o, const rx_buffer *b, int words,
                                   const char *index, bool store) {
  const char *W = p->L->vec_words[words == 1 ? 0 : words == 2 ? 1 : 2];
  base_strbuf_printf(o, "((%s%s*)%s)[%s]", store ? "" : "const ", W, cg_name(p, b->name), index);
}

/* `mma m16n8k16 c, a, b`: the fragments' 16-bit elements packed in pairs, low element first
 * (mma_cuda.h's registers), then mma.sync through the prelude's helper; c is read and written. */
/* `async_copy dst = src [if cond]` as cp.async (zero-filled where cond is false). */
static void cuda_async_copy(cg_printer *p, rx_strbuf *o, const rx_stmt *s) {
  const rx_tx *src = s->value;
  cg_indent(p, o);
  base_strbuf_append(o, s->cond ? "rx_cp_async_16_zfill(&" : "rx_cp_async_16(&");
  cg_access(p, o, s->buf, s->idx, s->nidx);
  base_strbuf_append(o, ", &");
  cg_access(p, o, src->buf, src->idx, src->nidx);
  if (s->cond) {
    base_strbuf_append(o, ", ");
    cg_value(p, o, s->cond, RX_DTYPE_BOOL);
  }
  base_strbuf_append(o, ");\n");
}

/* Fragment k of an mma or ldmatrix (ir.h) as an lvalue prefix in out: the buffer's name, or in
 * the indexed form `(&buf[row * elems])`, whose [i] is its element i. */
static void cuda_frag_ref(cg_printer *p, rx_strbuf *out, const rx_stmt *s, const rx_buffer *b,
                          int k) {
  if (k >= s->nidx) {
    base_strbuf_append(out, cg_name(p, b->name));
    return;
  }
  rx_tx *idx[2] = {s->idx[k], NULL};
  rx_tx zero = {.kind = RX_TX_SYM, .dtype = RX_DTYPE_I32, .sym = sym_expr_const(p->m->ctx, 0)};
  idx[1] = &zero;
  base_strbuf_append(out, "(&");
  cg_access(p, out, (rx_buffer *)b, idx, 2);
  base_strbuf_putc(out, ')');
}

/* `ldmatrix xN [trans] frag = buf[i...]`: the registers, then their 16-bit halves into frag. */
static void cuda_ldmatrix(cg_printer *p, rx_strbuf *o, const rx_stmt *s) {
  const char *bits = p->L->from_bits[s->buf->dtype];
  rx_strbuf fb = {0};
  cuda_frag_ref(p, &fb, s, s->buf, 0);
  const char *f = fb.data;
  cg_indent(p, o);
  base_strbuf_printf(o, "{ /* ldmatrix x%d%s */\n", s->count, s->trans ? " trans" : "");
  p->indent++;
  cg_indent(p, o);
  base_strbuf_printf(o, "unsigned rx_lm[%d];\n", s->count);
  cg_indent(p, o);
  base_strbuf_printf(o, "rx_ldmatrix_x%d%s(rx_lm, &", s->count, s->trans ? "_trans" : "");
  cg_access(p, o, s->value->buf, s->value->idx, s->value->nidx);
  base_strbuf_append(o, ");\n");
  for (int r = 0; r < 2 * s->count; r++) {
    char w[48];
    snprintf(w, sizeof w, r % 2 ? "rx_lm[%d] >> 16" : "rx_lm[%d] & 0xffffu", r / 2);
    cg_indent(p, o);
    base_strbuf_printf(o, "%s[%d] = ", f, r);
    base_strbuf_printf(o, bits, w);
    base_strbuf_append(o, ";\n");
  }
  p->indent--;
  cg_indent(p, o);
  base_strbuf_append(o, "}\n");
  base_strbuf_free(&fb);
}

/* Adds a prelude of codegen/mma_cuda.h to the kernel's helpers once, found by its first line's
 * `tag`. */
static void cuda_prelude(cg_printer *p, const char *tag, const char *text) {
  if (!p->helpers.data || !strstr(p->helpers.data, tag))
    base_strbuf_printf(&p->helpers, "%s", text);
}

/* The name of the helper of codegen/mma_cuda.h for a wgmma of N n (ir.h RX_STMT_WGMMA):
 * rx_wgmma_m64nNk16_{f16,bf16}f32, then _ra with A in registers, _tb with B MN-major. */
static void cuda_wgmma_name(char *name, size_t size, int n, bool bf16, bool regs, bool trans) {
  snprintf(name, size, "rx_wgmma_m64n%dk16_%sf32%s%s", n, bf16 ? "bf16" : "f16", regs ? "_ra" : "",
           trans ? "_tb" : "");
}

/* That helper, added to the kernel's helpers once: the descriptors (of B alone with A in
 * registers: its four 32-bit words, "r"), then wgmma.mma_async with the N / 2 accumulator
 * registers read and written ("+f"), scale-d true, imm-trans-b 1 for B MN-major. */
static void cuda_wgmma_helper(cg_printer *p, int n, bool bf16, bool regs, bool trans) {
  char name[64], tag[72];
  cuda_wgmma_name(name, sizeof name, n, bf16, regs, trans);
  snprintf(tag, sizeof tag, "%s(", name);
  if (p->helpers.data && strstr(p->helpers.data, tag)) return;
  rx_strbuf *o = &p->helpers;
  const char *ty = bf16 ? "bf16" : "f16";
  base_strbuf_printf(o,
                     "#ifndef SIMT_LANG_CUDA\n"
                     "static __device__ __forceinline__ void %s(float *d, const void *a,\n"
                     "                                           const void *b) {\n"
                     "  unsigned long long %sdb = rx_wgmma_desc(b);\n",
                     name, regs ? "" : "da = rx_wgmma_desc(a), ");
  if (regs) base_strbuf_append(o, "  const unsigned *ra = (const unsigned *)a;\n");
  base_strbuf_printf(o,
                     "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n\"\n"
                     "               \"wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {",
                     n, ty, ty);
  for (int i = 0; i < n / 2; i++) base_strbuf_printf(o, "%s%%%d", i ? ", " : "", i);
  if (regs)
    base_strbuf_printf(
        o, "}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1, %d;\\n}\"\n               : ", n / 2,
        n / 2 + 1, n / 2 + 2, n / 2 + 3, n / 2 + 4, trans ? 1 : 0);
  else
    base_strbuf_printf(o, "}, %%%d, %%%d, p, 1, 1, 0, %d;\\n}\"\n               : ", n / 2,
                       n / 2 + 1, trans ? 1 : 0);
  for (int i = 0; i < n / 2; i++)
    base_strbuf_printf(o, "%s\"+f\"(d[%d])%s", i ? (i % 6 ? " " : "\n                 ") : "", i,
                       i + 1 < n / 2 ? "," : "");
  if (regs)
    base_strbuf_append(o, "\n               : \"r\"(ra[0]), \"r\"(ra[1]), \"r\"(ra[2]), "
                          "\"r\"(ra[3]), \"l\"(db) : \"memory\");\n}\n#endif\n");
  else
    base_strbuf_append(o, "\n               : \"l\"(da), \"l\"(db) : \"memory\");\n}\n#endif\n");
}

/* The warpgroup statements (ir.h RX_STMT_WGMMA*), through codegen/mma_cuda.h's helpers. */
static void cuda_wgmma(cg_printer *p, rx_strbuf *o, const rx_stmt *s) {
  cuda_prelude(p, "relaxc warpgroup matrix-unit helpers", RX_CUDA_WGMMA_PRELUDE);
  cg_indent(p, o);
  if (s->kind == RX_STMT_WGMMA) {
    bool bf16 = s->value->buf->dtype == RX_DTYPE_BF16;
    bool regs = s->value->buf->scope == RX_SCOPE_LOCAL;
    char name[64];
    cuda_wgmma_helper(p, s->count, bf16, regs, s->trans);
    cuda_wgmma_name(name, sizeof name, s->count, bf16, regs, s->trans);
    base_strbuf_printf(o, "%s(%s, &", name, cg_name(p, s->buf->name));
    cg_access(p, o, s->value->buf, s->value->idx, s->value->nidx);
    base_strbuf_append(o, ", &");
    cg_access(p, o, s->wg_b->buf, s->wg_b->idx, s->wg_b->nidx);
    base_strbuf_append(o, ");\n");
  } else if (s->kind == RX_STMT_WGMMA_FENCE) {
    base_strbuf_append(o, "rx_wgmma_fence();\n");
  } else if (s->kind == RX_STMT_WGMMA_COMMIT) {
    base_strbuf_append(o, "rx_wgmma_commit();\n");
  } else { /* RX_STMT_WGMMA_WAIT */
    base_strbuf_printf(o, "rx_wgmma_wait<%d>();\n", s->count);
    if (s->buf) {
      cg_indent(p, o);
      base_strbuf_printf(o, "for (int rx_i = 0; rx_i < %lld; rx_i++) rx_wgmma_hold(%s[rx_i]);\n",
                         (long long)s->buf->shape[0]->value, cg_name(p, s->buf->name));
    }
  }
}

/* The matrix-unit statements (cg_lang.mma), through the helpers of codegen/mma_cuda.h. */
static void cuda_mma(cg_printer *p, rx_strbuf *o, const rx_stmt *s) {
  if (s->kind >= RX_STMT_WGMMA) {
    cuda_wgmma(p, o, s);
    return;
  }
  cuda_prelude(p, "relaxc matrix-unit helpers", RX_CUDA_MMA_PRELUDE);
  switch (s->kind) {
  case RX_STMT_ASYNC_COPY:
    cuda_async_copy(p, o, s);
    return;
  case RX_STMT_ASYNC_COMMIT:
    cg_indent(p, o);
    base_strbuf_append(o, "rx_cp_async_commit();\n");
    return;
  case RX_STMT_ASYNC_WAIT:
    cg_indent(p, o);
    base_strbuf_printf(o, "rx_cp_async_wait<%d>();\n", s->count);
    return;
  case RX_STMT_LDMATRIX:
    cuda_ldmatrix(p, o, s);
    return;
  default:
    break;
  }
  const char *bits = p->L->to_bits[s->mma_a->dtype];
  rx_strbuf refs[3] = {{0}};
  cuda_frag_ref(p, &refs[0], s, s->buf, 0);
  cuda_frag_ref(p, &refs[1], s, s->mma_a, 1);
  cuda_frag_ref(p, &refs[2], s, s->mma_b, 2);
  const char *c = refs[0].data;
  const char *srcs[2] = {refs[1].data, refs[2].data};
  static const char *const regs[2] = {"rx_ma", "rx_mb"};
  cg_indent(p, o);
  base_strbuf_append(o, "{ /* mma m16n8k16 */\n");
  p->indent++;
  cg_indent(p, o);
  base_strbuf_append(o, "unsigned rx_ma[4], rx_mb[2];\n");
  for (int w = 0; w < 2; w++)
    for (int r = 0; r < (w ? 2 : 4); r++) {
      rx_strbuf lo = {0}, hi = {0};
      base_strbuf_printf(&lo, "%s[%d]", srcs[w], 2 * r);
      base_strbuf_printf(&hi, "%s[%d]", srcs[w], 2 * r + 1);
      cg_indent(p, o);
      base_strbuf_printf(o, "%s[%d] = ", regs[w], r);
      base_strbuf_printf(o, bits, lo.data);
      base_strbuf_append(o, " | (");
      base_strbuf_printf(o, bits, hi.data);
      base_strbuf_append(o, " << 16);\n");
      base_strbuf_free(&lo);
      base_strbuf_free(&hi);
    }
  cg_indent(p, o);
  base_strbuf_printf(o, "rx_mma_16x8x16_%sf32(%s, rx_ma, rx_mb, %s);\n",
                     s->mma_a->dtype == RX_DTYPE_BF16 ? "bf16" : "f16", c, c);
  p->indent--;
  cg_indent(p, o);
  base_strbuf_append(o, "}\n");
  for (int i = 0; i < 3; i++) base_strbuf_free(&refs[i]);
}

/* Subgroup matrix fragments (ir.h, RX_STMT_FRAG) of 16x16x16 (targets.c's `sync-frag` shapes:
 * f16 or bf16 A and B, f32 accumulators; lowering allows no other) as the structs and rx_frag_*
 * helpers of codegen/mma_cuda.h: an ALLOC declares rx_frag_a16, rx_frag_b16 or rx_frag_acc; the
 * helpers hold them in mma.sync m16n8k16's register layouts, load and store them element by
 * element and multiply with two mma.sync. */
static void cuda_frag(cg_printer *p, rx_strbuf *o, const rx_stmt *s, const cg_frag_ops *f) {
  static const char *const types[] = {
      [RX_FRAG_A] = "rx_frag_a16", [RX_FRAG_B] = "rx_frag_b16", [RX_FRAG_ACC] = "rx_frag_acc"};
  const rx_buffer *b = s->buf;
  if (f->rows != 16 || f->cols != 16 || b->frag == RX_FRAG_NONE) {
    cg_error(p, s->loc, "fragment '%s': CUDA prints 16x16 fragments only", b->name);
    return;
  }
  cuda_prelude(p, "relaxc matrix-unit helpers", RX_CUDA_MMA_PRELUDE);
  cuda_prelude(p, "relaxc subgroup matrix fragments", RX_CUDA_FRAG_PRELUDE);
  cg_indent(p, o);
  if (s->kind == RX_STMT_ALLOC) {
    base_strbuf_printf(o, "%s %s;\n", types[b->frag], f->frag);
    return;
  }
  switch (s->frag_op) {
  case RX_FRAG_OP_FILL:
    base_strbuf_printf(o, "rx_frag_fill(%s, %s);\n", f->frag, f->value);
    return;
  case RX_FRAG_OP_MMA:
    base_strbuf_printf(o, "rx_frag_mma_%s(%s, %s, %s, %s);\n",
                       s->mma_a->dtype == RX_DTYPE_BF16 ? "bf16" : "f16", f->frag, f->a, f->b,
                       f->c);
    return;
  case RX_FRAG_OP_LOAD:
  case RX_FRAG_OP_STORE:
    base_strbuf_printf(o, "rx_frag_%s(%s, &%s[%s], %s, %s);\n",
                       s->frag_op == RX_FRAG_OP_LOAD ? "load" : "store", f->frag, f->mem, f->off,
                       f->stride, s->col_major ? "true" : "false");
    return;
  case RX_FRAG_OP_COUNT:
    break;
  }
  cg_error(p, s->loc, "malformed frag statement");
}

static void cuda_open(cg_printer *p, rx_strbuf *o) {
  rx_kernel *k = p->ck->k;
  cg_header_comment(p, o);
  if (p->uses[RX_DTYPE_F16]) base_strbuf_append(o, "#include <cuda_fp16.h>\n");
  if (p->uses[RX_DTYPE_BF16]) base_strbuf_append(o, "#include <cuda_bf16.h>\n");
  if (p->helpers.data) base_strbuf_printf(o, "\n%s", p->helpers.data);
  /* (threads, 1) unless the schedule assumes more blocks per SM (its threadIdx.x loop's
   * `blocks=N`, targets/occupancy.h): one resident block is all we ask, so ptxas may use the
   * registers a kernel needs instead of spilling to fit more blocks (the attention kernels
   * spilled 8 to 40 bytes at some head dims with the default) */
  base_strbuf_printf(o, "\nextern \"C\" __global__ void __launch_bounds__(%d, %d) %s(",
                     p->ck->nthreads, p->ck->min_blocks > 1 ? p->ck->min_blocks : 1, k->name);
  for (int i = 0; i < k->nargs; i++) {
    const rx_karg *a = &k->args[i];
    if (i) base_strbuf_append(o, ", ");
    if (a->kind == RX_KARG_BUFFER)
      base_strbuf_printf(o, "%s%s* __restrict__ %s", a->written ? "" : "const ",
                         p->L->types[a->dtype], cg_name(p, a->name));
    else
      base_strbuf_printf(o, "int %s", cg_name(p, a->name));
  }
  base_strbuf_append(o, ") {\n");
}

/* Names a user identifier must not take in CUDA C++ (NVRTC), beside cg_cxx_reserved (the C++
 * keywords, alternative tokens and C library names every C++ dialect shares): the built-in
 * variables and vector types (CUDA C++ Programming Guide, "Built-in Variables", "Built-in Vector
 * Types"), the math functions of the CUDA Math API (single and double precision, integer intrinsics
 * without the __ prefix), the atomics, and the fp16/bf16 types and functions of cuda_fp16.h /
 * cuda_bf16.h. Names with "__" are refused for every language by cg_ident. */
static const char *const cuda_reserved[] = {
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "dim3",
    "cudaError_t",
    "cuda",
    "nvcuda",
    "cooperative_groups",
    "half",
    "half2",
    "nv_bfloat16",
    "nv_bfloat162",
    "float16",
    "bfloat16",
    "acos",
    "acosf",
    "acosh",
    "acoshf",
    "asin",
    "asinf",
    "asinh",
    "asinhf",
    "atan",
    "atan2",
    "atan2f",
    "atanf",
    "atanh",
    "atanhf",
    "cbrt",
    "cbrtf",
    "ceil",
    "ceilf",
    "copysign",
    "copysignf",
    "cos",
    "cosf",
    "cosh",
    "coshf",
    "cospi",
    "cospif",
    "cyl_bessel_i0",
    "cyl_bessel_i0f",
    "cyl_bessel_i1",
    "cyl_bessel_i1f",
    "erf",
    "erfc",
    "erfcf",
    "erfcinv",
    "erfcinvf",
    "erfcx",
    "erfcxf",
    "erff",
    "erfinv",
    "erfinvf",
    "exp",
    "exp10",
    "exp10f",
    "exp2",
    "exp2f",
    "expf",
    "expm1",
    "expm1f",
    "fabs",
    "fabsf",
    "fdim",
    "fdimf",
    "fdivide",
    "fdividef",
    "floor",
    "floorf",
    "fma",
    "fmaf",
    "fmax",
    "fmaxf",
    "fmin",
    "fminf",
    "fmod",
    "fmodf",
    "frexp",
    "frexpf",
    "hypot",
    "hypotf",
    "ilogb",
    "ilogbf",
    "isfinite",
    "isinf",
    "isnan",
    "j0",
    "j0f",
    "j1",
    "j1f",
    "jn",
    "jnf",
    "ldexp",
    "ldexpf",
    "lgamma",
    "lgammaf",
    "llrint",
    "llrintf",
    "llround",
    "llroundf",
    "log",
    "log10",
    "log10f",
    "log1p",
    "log1pf",
    "log2",
    "log2f",
    "logb",
    "logbf",
    "logf",
    "lrint",
    "lrintf",
    "lround",
    "lroundf",
    "max",
    "min",
    "modf",
    "modff",
    "nan",
    "nanf",
    "nearbyint",
    "nearbyintf",
    "nextafter",
    "nextafterf",
    "norm",
    "norm3d",
    "norm3df",
    "norm4d",
    "norm4df",
    "normcdf",
    "normcdff",
    "normcdfinv",
    "normcdfinvf",
    "normf",
    "pow",
    "powf",
    "rcbrt",
    "rcbrtf",
    "remainder",
    "remainderf",
    "remquo",
    "remquof",
    "rhypot",
    "rhypotf",
    "rint",
    "rintf",
    "rnorm",
    "rnorm3d",
    "rnorm3df",
    "rnorm4d",
    "rnorm4df",
    "rnormf",
    "round",
    "roundf",
    "rsqrt",
    "rsqrtf",
    "scalbln",
    "scalblnf",
    "scalbn",
    "scalbnf",
    "signbit",
    "sin",
    "sincos",
    "sincosf",
    "sincospi",
    "sincospif",
    "sinf",
    "sinh",
    "sinhf",
    "sinpi",
    "sinpif",
    "sqrt",
    "sqrtf",
    "tan",
    "tanf",
    "tanh",
    "tanhf",
    "tgamma",
    "tgammaf",
    "trunc",
    "truncf",
    "y0",
    "y0f",
    "y1",
    "y1f",
    "yn",
    "ynf",
    "abs",
    "labs",
    "llabs",
    "fabsl",
    "umin",
    "umax",
    "llmin",
    "llmax",
    "ullmin",
    "ullmax",
    "mul24",
    "umul24",
    "mulhi",
    "umulhi",
    "mul64hi",
    "umul64hi",
    "saturate",
    "clz",
    "clzll",
    "popc",
    "popcll",
    "brev",
    "brevll",
    "ffs",
    "ffsll",
    "byte_perm",
    "div",
    "ldiv",
    "lldiv",
    "atomicAdd",
    "atomicSub",
    "atomicExch",
    "atomicMin",
    "atomicMax",
    "atomicInc",
    "atomicDec",
    "atomicCAS",
    "atomicAnd",
    "atomicOr",
    "atomicXor",
    "clock",
    "clock64",
    "trap",
    "hsqrt",
    "hrsqrt",
    "hrcp",
    "hlog",
    "hlog2",
    "hlog10",
    "hexp",
    "hexp2",
    "hexp10",
    "hcos",
    "hsin",
    "hceil",
    "hfloor",
    "htrunc",
    "hrint",
    "h2sqrt",
    "h2rsqrt",
    "h2rcp",
    "h2log",
    "h2log2",
    "h2log10",
    "h2exp",
    "h2exp2",
    "h2exp10",
    "h2cos",
    "h2sin",
    "h2ceil",
    "h2floor",
    "h2trunc",
    "h2rint",
    "char1",
    "char2",
    "char3",
    "char4",
    "uchar1",
    "uchar2",
    "uchar3",
    "uchar4",
    "short1",
    "short2",
    "short3",
    "short4",
    "ushort1",
    "ushort2",
    "ushort3",
    "ushort4",
    "int1",
    "int2",
    "int3",
    "int4",
    "uint1",
    "uint2",
    "uint3",
    "uint4",
    "long1",
    "long2",
    "long3",
    "long4",
    "ulong1",
    "ulong2",
    "ulong3",
    "ulong4",
    "longlong1",
    "longlong2",
    "longlong3",
    "longlong4",
    "ulonglong1",
    "ulonglong2",
    "ulonglong3",
    "ulonglong4",
    "float1",
    "float2",
    "float3",
    "float4",
    "double1",
    "double2",
    "double3",
    "double4",
    NULL,
};

const cg_lang cg_cuda = {
    .lang = RX_LANG_CUDA,
    .types = {[RX_DTYPE_F32] = "float",
              [RX_DTYPE_F16] = "__half",
              [RX_DTYPE_BF16] = "__nv_bfloat16",
              [RX_DTYPE_I64] = "long long",
              [RX_DTYPE_I32] = "int",
              [RX_DTYPE_I16] = "short",
              [RX_DTYPE_I8] = "signed char",
              [RX_DTYPE_U8] = "unsigned char",
              [RX_DTYPE_BOOL] = "bool",
              [RX_DTYPE_F64] = "double",
              [RX_DTYPE_U16] = "unsigned short",
              [RX_DTYPE_U32] = "unsigned int",
              [RX_DTYPE_U64] = "unsigned long long"},
    .idx32 = "int",
    .idx64 = "long long",
    .i64_suffix = "ll",
    .u64_suffix = "ull",
    .f64_suffix = "",
    .f32_suffix = "f",
    .c_casts = true,
    .let_prefix = "const ",
    .thread_idx = {"threadIdx.x", "threadIdx.y", "threadIdx.z"},
    .block_idx = {"blockIdx.x", "blockIdx.y", "blockIdx.z"},
    .barrier = "__syncthreads();",
    .unroll = "#pragma unroll",
    .rolled = "#pragma unroll 1",
    .fn_prefix = "static __device__ __forceinline__ ",
    .check_buf = "int*",
    .math = {[RX_INTRIN_EXP] = "expf",   [RX_INTRIN_EXP2] = "exp2f",   [RX_INTRIN_LOG] = "logf",
             [RX_INTRIN_LOG2] = "log2f", [RX_INTRIN_SQRT] = "sqrtf",   [RX_INTRIN_RSQRT] = "rsqrtf",
             [RX_INTRIN_TANH] = "tanhf", [RX_INTRIN_ERF] = "erff",     [RX_INTRIN_SIN] = "sinf",
             [RX_INTRIN_COS] = "cosf",   [RX_INTRIN_ASIN] = "asinf",   [RX_INTRIN_ACOS] = "acosf",
             [RX_INTRIN_ATAN] = "atanf", [RX_INTRIN_FLOOR] = "floorf", [RX_INTRIN_CEIL] = "ceilf",
             [RX_INTRIN_POW] = "powf",   [RX_INTRIN_FMA] = "fmaf",     [RX_INTRIN_ABS] = "fabsf",
             [RX_INTRIN_MIN] = "fminf",  [RX_INTRIN_MAX] = "fmaxf"},
    .math_f64 =
        {[RX_INTRIN_EXP] = "exp",   [RX_INTRIN_EXP2] = "exp2",   [RX_INTRIN_LOG] = "log",
         [RX_INTRIN_LOG2] = "log2", [RX_INTRIN_SQRT] = "sqrt",   [RX_INTRIN_RSQRT] = "rsqrt",
         [RX_INTRIN_TANH] = "tanh", [RX_INTRIN_ERF] = "erf",     [RX_INTRIN_SIN] = "sin",
         [RX_INTRIN_COS] = "cos",   [RX_INTRIN_ASIN] = "asin",   [RX_INTRIN_ACOS] = "acos",
         [RX_INTRIN_ATAN] = "atan", [RX_INTRIN_FLOOR] = "floor", [RX_INTRIN_CEIL] = "ceil",
         [RX_INTRIN_POW] = "pow",   [RX_INTRIN_FMA] = "fma",     [RX_INTRIN_ABS] = "fabs",
         [RX_INTRIN_MIN] = "fmin",  [RX_INTRIN_MAX] = "fmax"},
    .int_abs = "abs",
    .i64_abs = "llabs",
    .int_min = "min",
    .int_max = "max",
    .has_erf = true,
    .to_f32 = {[RX_DTYPE_F16] = "__half2float(%s)", [RX_DTYPE_BF16] = "__bfloat162float(%s)"},
    .from_f32 = {[RX_DTYPE_F16] = "__float2half(%s)", [RX_DTYPE_BF16] = "__float2bfloat16(%s)"},
    .arith_via_f32 = {[RX_DTYPE_BF16] = true},
    .vec_words = {"unsigned int", "uint2", "uint4"},
    .from_bits = {[RX_DTYPE_F32] = "__uint_as_float(%s)",
                  [RX_DTYPE_F16] = "__ushort_as_half((unsigned short)(%s))",
                  [RX_DTYPE_BF16] = "__ushort_as_bfloat16((unsigned short)(%s))",
                  [RX_DTYPE_I32] = "((int)(%s))",
                  [RX_DTYPE_I16] = "((short)(%s))",
                  [RX_DTYPE_I8] = "((signed char)(%s))",
                  [RX_DTYPE_U8] = "((unsigned char)(%s))",
                  [RX_DTYPE_U16] = "((unsigned short)(%s))",
                  [RX_DTYPE_U32] = "(%s)"},
    .to_bits = {[RX_DTYPE_F32] = "__float_as_uint(%s)",
                [RX_DTYPE_F16] = "((unsigned int)__half_as_ushort(%s))",
                [RX_DTYPE_BF16] = "((unsigned int)__bfloat16_as_ushort(%s))",
                [RX_DTYPE_I32] = "((unsigned int)(%s))",
                [RX_DTYPE_I16] = "((unsigned int)(unsigned short)(%s))",
                [RX_DTYPE_I8] = "((unsigned int)(unsigned char)(%s))",
                [RX_DTYPE_U8] = "((unsigned int)(%s))",
                [RX_DTYPE_U16] = "((unsigned int)(%s))",
                [RX_DTYPE_U32] = "(%s)"},
    .f32_bits = "__int_as_float((int)%s)",
    .reserved = cuda_reserved,
    .reserved_shared = cg_cxx_reserved,
    .reserved_prefixes = NULL,
    .open_kernel = cuda_open,
    .shared_decl = cuda_shared,
    .subgroup = cuda_subgroup,
    .mma = cuda_mma,
    .frag = cuda_frag,
    .scalar_ref = cuda_scalar_ref,
    .vector_ref = cuda_vector_ref,
    .shared_vector_ref = cuda_shared_vector_ref,
};
