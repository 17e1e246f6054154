/* The matrix-unit kernels of the static checks and their compilation (support_mma.h): the table
 * rxm_kernels, one line per kernel, and what the two tests share to build and run a line. */
#include "support_mma.h"

#include "ops/legalize.h"
#include "support_pipeline.h"
#include "targets/occupancy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A GEMM y = x @ W^T (nt) or x @ W, f16 or bf16, K = 256, M = 4000 columns (a multiple of 8, no
 * multiple of a 64- or 128-column tile; enough columns that 400 rows take the 128 x 128 tiles). */
#define GEMM_NT(T)                                                                                 \
  "tensor_fn prog(x: " T "[n, 256], w: " T "[4000, 256], out y: " T                                \
  "[n, 4000]) where n <= 4096 {\n"                                                                 \
  "  for i in 0..n, j in 0..4000 {\n    alloc acc: f32[1] local\n    reduce r in 0..256 {\n"       \
  "      init { acc[0] = 0.0 }\n      update { acc[0] = acc[0] + f32(x[i, r]) * f32(w[j, r]) }\n"  \
  "    }\n    y[i, j] = " T "(acc[0])\n  }\n}\n"
#define GEMM_NN(T)                                                                                 \
  "tensor_fn prog(x: " T "[n, 256], w: " T "[256, 4000], out y: " T                                \
  "[n, 4000]) where n <= 4096 {\n"                                                                 \
  "  for i in 0..n, j in 0..4000 {\n    alloc acc: f32[1] local\n    reduce r in 0..256 {\n"       \
  "      init { acc[0] = 0.0 }\n      update { acc[0] = acc[0] + f32(x[i, r]) * f32(w[r, j]) }\n"  \
  "    }\n    y[i, j] = " T "(acc[0])\n  }\n}\n"
/* The same at K = 192 (6 chunks of the 32-k pipeline) with a bias in the epilogue, f16, M = 200:
 * where gemm_mma spilled (168 bytes at 255 registers on sm_80; gemm_mma_64 222 registers, and
 * 20 bytes of spills with a residual too) while the target's compiler unrolled their constant
 * chunk loop whole. */
#define GEMM_NT_K192_BIAS                                                                          \
  "tensor_fn prog(x: f16[n, 192], w: f16[200, 192], b: f16[200], out y: f16[n, 200]) "             \
  "where n <= 4096 {\n"                                                                            \
  "  for i in 0..n, j in 0..200 {\n    alloc acc: f32[1] local\n    reduce r in 0..192 {\n"        \
  "      init { acc[0] = 0.0 }\n      update { acc[0] = acc[0] + f32(x[i, r]) * f32(w[j, r]) }\n"  \
  "    }\n    y[i, j] = f16(acc[0] + f32(b[j]))\n  }\n}\n"
/* The same with a residual r [n, 200] added in the epilogue (a projection into the residual
 * stream): its loads at the accumulators' points use 25% of their sectors (test_kernel_checks'
 * expected failure). */
#define GEMM_NT_K192_RES                                                                           \
  "tensor_fn prog(x: f16[n, 192], w: f16[200, 192], r: f16[n, 200], out y: f16[n, 200]) "          \
  "where n <= 4096 {\n"                                                                            \
  "  for i in 0..n, j in 0..200 {\n    alloc acc: f32[1] local\n    reduce k in 0..192 {\n"        \
  "      init { acc[0] = 0.0 }\n      update { acc[0] = acc[0] + f32(x[i, k]) * f32(w[j, k]) }\n"  \
  "    }\n    y[i, j] = f16(acc[0] + f32(r[i, j]))\n  }\n}\n"
/* quant_matmul of x f16 [n, 256] with W [m, 256] in a scheme of base/quant.h (group 32) */
#define QMM(W, S)                                                                                  \
  "graph_fn main(x: f16[n, 256], w: " W ", s: f16[m, 8]) -> f16[n, m] {\n"                         \
  "  dataflow {\n    y = quant_matmul(x, w, s, scheme=\"" S "\")\n  }\n  return y\n}\n"
/* quant_matmul of x f16 [n, 256] with a checkpoint's int32 words (issue 32; ops/quant.c): AWQ's
 * qweight [256, m] (8 m outputs), zeros and scales in 2 groups of 128; GPTQ's [32, 8 m] with 5
 * groups picked by g_idx (any group for any k: act-order) */
#define QMM_AWQ                                                                                    \
  "graph_fn main(x: f16[n, 256], w: i32[256, m], s: f16[2, m * 8], z: i32[2, m]) -> "              \
  "f16[n, m * 8] {\n  dataflow {\n    y = quant_matmul(x, w, s, z, scheme=\"awq_g128\")\n  }\n"    \
  "  return y\n}\n"
#define QMM_GPTQ(S)                                                                                \
  "graph_fn main(x: f16[n, 256], w: i32[32, m * 8], s: f16[5, m * 8], z: i32[5, m], g: i32[256]) " \
  "-> f16[n, m * 8] {\n  dataflow {\n    y = quant_matmul(x, w, s, z, g, scheme=\"" S "\")\n  }\n" \
  "  return y\n}\n"
/* rms_norm_matmul of f32 rows x [n, 288] (9 chunks of 32 k: no multiple of the 4 warps' 2
 * unrolled chunks) into f16 weights [m, 288], plain or gated (silu(x W^T) * (x W2^T)): the folded
 * norm of the decode step (ops/quant.c), its sum of squares a second reduction of the GEMV. */
#define NMM(W2, G)                                                                                 \
  "graph_fn main(x: f32[n, 288], nw: f32[288], w: f16[m, 288]" W2 ") -> f16[n, m] "                \
  "where n <= 16 {\n  dataflow {\n    y = rms_norm_matmul(x, nw, w" G                              \
  ", epsilon=1e-5)\n  }\n  return y\n}\n"
/* paged attention over a cache of 16-token pages, f16, 4 query heads on 2 KV heads (GQA) */
#define PREFILL                                                                                    \
  "graph_fn main(q: f16[n, 4, 64], pages: f16[p, 2, 2, 16, 64], page_table: i32[b, mp], "          \
  "kv_len: i32[b], q_seq: i32[n], q_pos: i32[n]) {\n"                                              \
  "  y = paged_attention(q, pages, page_table, kv_len, q_seq, q_pos, window=0)\n  return y\n}\n"
/* the same at head dim 128, bf16, GQA 4 (ops/attention_fa3.c's second shape) */
#define PREFILL128                                                                                 \
  "graph_fn main(q: bf16[n, 8, 128], pages: bf16[p, 2, 2, 16, 128], page_table: i32[b, mp], "      \
  "kv_len: i32[b], q_seq: i32[n], q_pos: i32[n]) {\n"                                              \
  "  y = paged_attention(q, pages, page_table, kv_len, q_seq, q_pos, window=0)\n  return y\n}\n"
#define DECODE                                                                                     \
  "graph_fn main(q: f16[b, 8, 128], pages: f16[p, 2, 2, 16, 128], page_table: i32[b, mp], "        \
  "kv_len: i32[b]) {\n"                                                                            \
  "  y = paged_decode_attention(q, pages, page_table, kv_len, window=0)\n  return y\n}\n"

#define PIPE (RXM_MMA | RXM_LDMATRIX | RXM_CP_ASYNC) /* gemm_mma's cp.async/ldmatrix pipeline */

/* One line per kernel (support_mma.h says how to add one). */
const rxm_spec rxm_kernels[] = {
    {"gemm_mma f16 x @ W^T", GEMM_NT("f16"), "gemm_mma", "n=400", PIPE | RXM_SM80,
     TGT_OCC_GEMM_MMA},
    {"gemm_mma_64 f16 x @ W^T", GEMM_NT("f16"), "gemm_mma_64", "n=33;n=100", PIPE,
     TGT_OCC_GEMM_MMA_64},
    {"gemm_mma bf16 x @ W^T", GEMM_NT("bf16"), "gemm_mma", "n=400", PIPE | RXM_SM80,
     TGT_OCC_GEMM_MMA},
    {"gemm_wgmma f16 x @ W^T", GEMM_NT("f16"), "gemm_wgmma", "n=400",
     RXM_WGMMA | RXM_CP_ASYNC | RXM_SM90, TGT_OCC_GEMM_WGMMA},
    {"gemm_wgmma bf16 x @ W^T", GEMM_NT("bf16"), "gemm_wgmma", "n=400",
     RXM_WGMMA | RXM_CP_ASYNC | RXM_SM90, TGT_OCC_GEMM_WGMMA},
    {"gemm_mma f16 x @ W", GEMM_NN("f16"), "gemm_mma", "n=400", PIPE, TGT_OCC_GEMM_MMA},
    {"gemm_mma f16 K=192 bias", GEMM_NT_K192_BIAS, "gemm_mma", "n=2100", PIPE | RXM_SM80,
     TGT_OCC_GEMM_MMA},
    {"gemm_mma f16 K=192 residual", GEMM_NT_K192_RES, "gemm_mma", "n=2100", PIPE | RXM_SM80,
     TGT_OCC_GEMM_MMA},
    {"gemm_mma_64 f16 K=192 bias", GEMM_NT_K192_BIAS, "gemm_mma_64", "n=33;n=100;n=1000", PIPE,
     TGT_OCC_GEMM_MMA_64},
    {"gemm_wgmma f16 K=192 bias", GEMM_NT_K192_BIAS, "gemm_wgmma", "n=2100",
     RXM_WGMMA | RXM_CP_ASYNC | RXM_SM90, TGT_OCC_GEMM_WGMMA},
    {"gemm_mma_64 bf16 x @ W", GEMM_NN("bf16"), "gemm_mma_64", "n=33", PIPE, TGT_OCC_GEMM_MMA_64},
    {"gemm_mma_dq q4f16_g32 M=263", QMM("u8[m, 128]", "q4f16_g32"), "gemm_mma_dq", "n=100,m=263",
     PIPE | RXM_V64, TGT_OCC_GEMM_MMA_DQ},
    {"gemm_mma_dq q4f16_g32 M=264", QMM("u8[m, 128]", "q4f16_g32"), "gemm_mma_dq",
     "n=100,m=264;n=1000,m=264", PIPE | RXM_V64, TGT_OCC_GEMM_MMA_DQ},
    {"gemm_mma_dq q8f16 M=263", QMM("i8[m, 256]", "q8f16"), "gemm_mma_dq", "n=100,m=263",
     PIPE | RXM_V64, TGT_OCC_GEMM_MMA_DQ},
    {"gemm_mma_dq q8f16 M=264", QMM("i8[m, 256]", "q8f16"), "gemm_mma_dq", "n=100,m=264",
     PIPE | RXM_V64, TGT_OCC_GEMM_MMA_DQ},
    {"gemm_mma_dq_64 q4f16_g32 M=263", QMM("u8[m, 128]", "q4f16_g32"), "gemm_mma_dq_64",
     "n=33,m=263", PIPE | RXM_V64, TGT_OCC_GEMM_MMA_64},
    {"gemm_mma_dq_64 q4f16_g32 M=272", QMM("u8[m, 128]", "q4f16_g32"), "gemm_mma_dq_64",
     "n=33,m=272", PIPE | RXM_V64, TGT_OCC_GEMM_MMA_64},
    {"awq_g128 gemm_mma_dq", QMM_AWQ, "gemm_mma_dq", "n=100,m=33", PIPE, TGT_OCC_GEMM_MMA_DQ},
    {"awq_g128 gemm_mma_dq_64", QMM_AWQ, "gemm_mma_dq_64", "n=33,m=33", PIPE,
     TGT_OCC_GEMM_MMA_DQW_64},
    {"gptq_v2 gemm_mma_dq", QMM_GPTQ("gptq_v2"), "gemm_mma_dq", "n=100,m=33", PIPE,
     TGT_OCC_GEMM_MMA_DQ},
    {"gptq gemm_mma_dq_64", QMM_GPTQ("gptq"), "gemm_mma_dq_64", "n=33,m=33", PIPE,
     TGT_OCC_GEMM_MMA_DQW_64},
    {"gemv_mma f16 x @ W^T", GEMM_NT("f16"), "gemv_mma", "n=2;n=7;n=16", RXM_MMA | RXM_V128,
     TGT_OCC_GEMV_MMA},
    {"gemv_mma rms_norm_matmul f16 M=263", NMM("", ""), "gemv_mma",
     "n=2,m=263;n=7,m=263;n=16,m=263", RXM_MMA | RXM_V128, TGT_OCC_GEMV_MMA},
    {"gemv_mma rms_norm_matmul f16 M=272", NMM("", ""), "gemv_mma", "n=2,m=272;n=7,m=272",
     RXM_MMA | RXM_V128, TGT_OCC_GEMV_MMA},
    {"gemv_mma rms_norm_matmul gated f16 M=263", NMM(", w2: f16[m, 288]", ", w2, gated=true"),
     "gemv_mma", "n=2,m=263;n=7,m=263;n=16,m=263", RXM_MMA | RXM_V128, TGT_OCC_GEMV_MMA},
    {"gemv_mma rms_norm_matmul gated f16 M=272", NMM(", w2: f16[m, 288]", ", w2, gated=true"),
     "gemv_mma", "n=7,m=272;n=16,m=272", RXM_MMA | RXM_V128, TGT_OCC_GEMV_MMA},
    {"paged_attention (FA2) f16", PREFILL, NULL, "n=33,b=1,mp=4,p=4;n=100,b=1,mp=8,p=8",
     PIPE | RXM_PAGED | RXM_SM80, TGT_OCC_ATTN_FA2},
    {"paged_attention (FA3) f16", PREFILL, NULL, "n=33,b=1,mp=4,p=4;n=100,b=1,mp=8,p=8",
     RXM_WGMMA | RXM_CP_ASYNC | RXM_PAGED | RXM_SM90, TGT_OCC_ATTN_FA3},
    {"paged_attention (FA3) bf16 d=128", PREFILL128, NULL, "n=100,b=1,mp=8,p=8",
     RXM_WGMMA | RXM_CP_ASYNC | RXM_PAGED | RXM_SM90, TGT_OCC_ATTN_FA3},
    {"paged_decode_attention f16", DECODE, NULL, "b=1,mp=64,p=64;b=3,mp=7,p=21",
     RXM_CP_ASYNC | RXM_PAGED, TGT_OCC_DECODE_ATTN},
};
const int rxm_nkernels = (int)RX_ARRAY_LEN(rxm_kernels);

bool rxm_build(const rxm_spec *spec, const rx_target *t, rxm_kernel *out, char *why, size_t n) {
  memset(out, 0, sizeof *out);
  out->spec = spec;
  out->m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(out->m, spec->name, spec->text, strlen(spec->text), &d) &&
            ops_module_normalize(out->m, &d);
  rx_graph_fn *g = ok ? ir_module_graph_fn(out->m, "main") : NULL;
  if (ok && !g) {
    out->f = ir_module_tensor_fn(out->m, "prog");
  } else if (ok) {
    out->f = ops_legalize_call(out->m, g->body.blocks[0]->bindings[0]->value, "prog", &d);
  }
  ok = ok && out->f && ir_module_verify(out->m, &d) &&
       sched_schedule(out->m, out->f, t, &d, &out->sr) &&
       rxk_codegen(out->m, out->sr.fn, t, &d, &out->kl);
  if (ok && spec->variant) {
    out->variant = -1;
    for (int v = 0; v < out->sr.nvariants && out->variant < 0; v++)
      if (out->sr.variants[v].name && !strcmp(out->sr.variants[v].name, spec->variant))
        out->variant = v;
    if (out->variant < 0 || out->variant >= out->kl.n) {
      rx_strbuf names = {0};
      for (int v = 0; v < out->sr.nvariants; v++)
        base_strbuf_printf(&names, "%s%s", v ? ", " : "",
                           out->sr.variants[v].name ? out->sr.variants[v].name : "(none)");
      snprintf(why, n, "%s [%s]: no variant %s (the schedule gives %s)", spec->name, t->name,
               spec->variant, names.data ? names.data : "none");
      base_strbuf_free(&names);
      base_diag_free(&d);
      rxm_free(out);
      return false;
    }
  }
  if (ok && out->kl.n < 1) ok = false;
  if (!ok) {
    snprintf(why, n, "%s [%s]: does not compile:\n%s", spec->name, t->name, rx_diag_text(&d));
    base_diag_free(&d);
    rxm_free(out);
    return false;
  }
  base_diag_free(&d);
  out->kernel = out->kl.kernels[out->variant];
  return true;
}

void rxm_free(rxm_kernel *k) {
  if (k->m) rx_module_free(k->m);
  memset(k, 0, sizeof *k);
}

bool rxm_env(const rxm_kernel *k, int run, rxk_env *out, char *why, size_t n) {
  const char *p = k->spec->sizes;
  for (int r = 0; r < run && p; r++) {
    p = strchr(p, ';');
    if (p) p++;
  }
  if (!p || !*p) return false;
  rxk_program_vars(k->f, out);
  for (int v = 0; v < out->n; v++) out->values[v] = 1;
  while (*p && *p != ';') {
    char name[32];
    long long value;
    int used = 0;
    if (sscanf(p, "%31[a-z_0-9]=%lld%n", name, &value, &used) != 2) {
      snprintf(why, n, "%s: bad sizes '%s'", k->spec->name, k->spec->sizes);
      return false;
    }
    bool found = false;
    for (int v = 0; v < out->n; v++)
      if (!strcmp(out->vars[v]->name, name)) out->values[v] = value, found = true;
    if (!found) {
      snprintf(why, n, "%s: the program has no size %s", k->spec->name, name);
      return false;
    }
    p += used;
    if (*p == ',') p++;
  }
  for (int v = 0; v < k->sr.nvariants; v++) { /* the host takes the first variant that holds */
    int64_t c = 1;
    if (k->sr.variants[v].cond && !rxk_eval(k->sr.variants[v].cond, out, &c)) c = 0;
    if (!c) continue;
    if (v == k->variant) return true;
    snprintf(why, n, "%s: run %d selects variant %s, not %s", k->spec->name, run,
             k->sr.variants[v].name ? k->sr.variants[v].name : "?", k->spec->variant);
    return false;
  }
  if (k->sr.nvariants <= 1) return true;
  snprintf(why, n, "%s: run %d selects no variant", k->spec->name, run);
  return false;
}

static int64_t env_value(const rxk_env *e, const char *name) {
  for (int v = 0; v < e->n; v++)
    if (!strcmp(e->vars[v]->name, name)) return e->values[v];
  return 1;
}

void rxm_fill_tables(const rxm_kernel *k, const rxk_env *e, rxk_buffers *b) {
  if (!(k->spec->flags & RXM_PAGED)) return;
  int64_t mp = env_value(e, "mp"), len = 16 * mp - 5, nq = env_value(e, "n");
  for (int i = 0; i < k->f->nparams; i++) {
    const rx_param *p = k->f->params[i];
    if (p->kind != RX_PARAM_BUFFER || p->buf->dtype != RX_DTYPE_I32) continue;
    int32_t *d = b->arg[i].data;
    size_t count = b->bytes[i] / 4;
    for (size_t j = 0; j < count; j++) {
      const char *nm = p->buf->name;
      d[j] = !strcmp(nm, "kv_len")       ? (int32_t)len
             : !strcmp(nm, "page_table") ? (int32_t)j /* sequence s: pages s mp .. */
             : !strcmp(nm, "q_pos")      ? (int32_t)(len - nq + (int64_t)j)
                                         : 0; /* q_seq: one sequence */
    }
  }
}
