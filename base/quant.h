/* base/quant.h: the quantization schemes of weights (issue 15), listed once as data. A quantized
 * weight W [out, in] of a matmul y = x W^T is a few buffers of packed integers plus scales, read
 * by the tensor program of `quant_matmul` (ops/quant.c: the loads and the integer and float
 * arithmetic of one element) and by nothing else, so every printer prints it as it prints any
 * other program. Two families:
 *
 *   relaxc's own, group-wise along `in` (one group: `group` consecutive weights of a row):
 *     q4f16_gG    w u8 [out, in / 2]  (two weights a byte: even k in the low nibble, odd k in
 *                 the high one), s f16 [out, in / G];          W = s * (q - 8)
 *     q4f16a_gG   w and s as q4f16_gG, z u8 [out, in / G] (0..15);  W = s * (q - z)
 *     q8f16_gG    w i8 [out, in], s f16 [out, in / G];          W = s * q
 *     (q8f16 is q8f16_g32.)
 *   GGUF's block formats as llama.cpp writes them (RX_GGUF_TYPES below): one u8 buffer
 *   [out, in / block * block bytes] holding each row's blocks as they are in the file, scales
 *   inside the blocks.
 *
 *   Hugging Face checkpoints' own formats, read as the files hold them (no repacking at load):
 *     awq_gG      AutoAWQ "gemm" (quant_method "awq", version "gemm"): w = qweight i32
 *                 [in, out / 8] (eight 4-bit weights of one k per int32, column 8c + p in nibble
 *                 (p % 2) 4 + p / 2: AWQ's order [0, 2, 4, 6, 1, 3, 5, 7]), s = scales f16
 *                 [in / G, out], z = qzeros i32 [in / G, out / 8] packed as w;
 *                 W[o, k] = s[k / G, o] (q - z)
 *     gptq        GPTQ (quant_method "gptq", bits 4, checkpoint_format "gptq"): w = qweight i32
 *                 [in / 8, out] (eight consecutive k per int32, the lowest k in the low bits),
 *                 s = scales f16 [groups, out], z = qzeros i32 [groups, out / 8] (column 8c + p
 *                 in nibble p) holding zero - 1 (mod 16), g = g_idx i32 [in] (the group of k; with
 *                 desc_act a permutation, never assumed k / G); W[o, k] = s[g, o] (q - z)
 *     gptq_v2     the same with z holding the zero itself (checkpoint_format "gptq_v2")
 *     fp8_e4m3    w = float8 e4m3fn bytes u8 [out, in], s = f32 [1, 1]; W = s e4m3(w)
 *     fp8_e4m3_ch the same with s f32 [out, 1] (compressed-tensors' per-channel weight_scale)
 *
 * bytes per block counts everything the block's weights need (packed quants, scale, zero point),
 * so bits per weight = 8 * block_bytes / block.
 *
 * The GGML tensor types (RX_GGUF_TYPES: each block format by its number in a GGUF file, with its
 * geometry) are listed here too: quant_matmul reads those blocks (ops/quant.c), and the GGUF
 * reader of frontends/gguf/ takes its type table from here. */
#ifndef RX_BASE_QUANT_H
#define RX_BASE_QUANT_H

#include "base.h"

/* ggml's QK_K: the elements of one K-quant super-block. */
#define RX_GGUF_QK_K 256

/* GGML tensor types, every one the format's definition names (ggml.h's enum ggml_type, as of
 * gguf-py 0.19.0): X(NAME, number, elements per block, bytes per block, dequantizer). The ten
 * types relaxc reads carry their block geometry (ggml-common.h's block structs) and the function
 * of frontends/gguf/gguf_quant.c that dequantizes one block; the others carry 0, 0, 0: they are
 * known by name so that a file holding one is refused as "type Q3_K (11) is not supported". */
#define RX_GGUF_TYPES(X)                                                                           \
  X(F32, 0, 1, 4, rx_gguf_deq_f32)                                                                 \
  X(F16, 1, 1, 2, rx_gguf_deq_f16)                                                                 \
  X(Q4_0, 2, 32, 18, rx_gguf_deq_q4_0) /* f16 d; 16 bytes of nibbles */                            \
  X(Q4_1, 3, 32, 20, rx_gguf_deq_q4_1) /* f16 d, m; 16 bytes of nibbles */                         \
  X(Q5_0, 6, 32, 22, rx_gguf_deq_q5_0) /* f16 d; 4 bytes of high bits; nibbles */                  \
  X(Q5_1, 7, 0, 0, 0)                                                                              \
  X(Q8_0, 8, 32, 34, rx_gguf_deq_q8_0) /* f16 d; 32 int8 */                                        \
  X(Q8_1, 9, 0, 0, 0)                                                                              \
  X(Q2_K, 10, 0, 0, 0)                                                                             \
  X(Q3_K, 11, 0, 0, 0)                                                                             \
  X(Q4_K, 12, 256, 144, rx_gguf_deq_q4_k) /* f16 d, dmin; 12 bytes of 6-bit scales; nibbles */     \
  X(Q5_K, 13, 256, 176, rx_gguf_deq_q5_k) /* as Q4_K, 32 bytes of high bits before the nibbles */  \
  X(Q6_K, 14, 256, 210, rx_gguf_deq_q6_k) /* ql[128], qh[64], int8 scales[16], f16 d */            \
  X(Q8_K, 15, 0, 0, 0)                                                                             \
  X(IQ2_XXS, 16, 0, 0, 0)                                                                          \
  X(IQ2_XS, 17, 0, 0, 0)                                                                           \
  X(IQ3_XXS, 18, 0, 0, 0)                                                                          \
  X(IQ1_S, 19, 0, 0, 0)                                                                            \
  X(IQ4_NL, 20, 0, 0, 0)                                                                           \
  X(IQ3_S, 21, 0, 0, 0)                                                                            \
  X(IQ2_S, 22, 0, 0, 0)                                                                            \
  X(IQ4_XS, 23, 0, 0, 0)                                                                           \
  X(I8, 24, 0, 0, 0)                                                                               \
  X(I16, 25, 0, 0, 0)                                                                              \
  X(I32, 26, 0, 0, 0)                                                                              \
  X(I64, 27, 0, 0, 0)                                                                              \
  X(F64, 28, 0, 0, 0)                                                                              \
  X(IQ1_M, 29, 0, 0, 0)                                                                            \
  X(BF16, 30, 1, 2, rx_gguf_deq_bf16)                                                              \
  X(TQ1_0, 34, 0, 0, 0)                                                                            \
  X(TQ2_0, 35, 0, 0, 0)                                                                            \
  X(MXFP4, 39, 0, 0, 0)                                                                            \
  X(NVFP4, 40, 0, 0, 0)                                                                            \
  X(Q1_0, 41, 0, 0, 0)

typedef enum rx_gguf_type {
#define X(N, num, block, bytes, deq) RX_GGUF_TYPE_##N = num,
  RX_GGUF_TYPES(X)
#undef X
} rx_gguf_type;

/* How the element is computed (ops/quant.c has one writer per kind). */
typedef enum rx_quant_kind {
  RX_QUANT_INT4,      /* relaxc's symmetric int4: w, s */
  RX_QUANT_INT4_ZERO, /* relaxc's asymmetric int4: w, s, z */
  RX_QUANT_INT8,      /* relaxc's int8: w, s */
  RX_QUANT_GGUF,      /* a GGUF block format: w */
  RX_QUANT_AWQ,       /* AutoAWQ's GEMM layout: qweight, scales, qzeros (below) */
  RX_QUANT_GPTQ,      /* GPTQ's layout, zeros stored minus 1 (checkpoint_format "gptq"): qweight,
                         scales, qzeros, g_idx */
  RX_QUANT_GPTQ_V2,   /* the same with the zeros as they are (checkpoint_format "gptq_v2") */
  RX_QUANT_FP8,       /* float8 e4m3fn weights, one f32 scale for the tensor: weight, scale */
  RX_QUANT_FP8_CH,    /* the same with a scale per output channel */
} rx_quant_kind;

/* X(ENUM, name, kind, weights per block, bytes per block, GGUF type or -1) */
#define RX_QUANT_SCHEMES(X)                                                                        \
  X(Q4F16_G32, "q4f16_g32", RX_QUANT_INT4, 32, 18, -1)                                             \
  X(Q4F16_G64, "q4f16_g64", RX_QUANT_INT4, 64, 34, -1)                                             \
  X(Q4F16_G128, "q4f16_g128", RX_QUANT_INT4, 128, 66, -1)                                          \
  X(Q4F16A_G32, "q4f16a_g32", RX_QUANT_INT4_ZERO, 32, 19, -1)                                      \
  X(Q4F16A_G64, "q4f16a_g64", RX_QUANT_INT4_ZERO, 64, 35, -1)                                      \
  X(Q4F16A_G128, "q4f16a_g128", RX_QUANT_INT4_ZERO, 128, 67, -1)                                   \
  X(Q8F16, "q8f16", RX_QUANT_INT8, 32, 34, -1)                                                     \
  X(Q8F16_G64, "q8f16_g64", RX_QUANT_INT8, 64, 66, -1)                                             \
  X(Q8F16_G128, "q8f16_g128", RX_QUANT_INT8, 128, 130, -1)                                         \
  X(GGUF_Q8_0, "Q8_0", RX_QUANT_GGUF, 32, 34, RX_GGUF_TYPE_Q8_0)                                   \
  X(GGUF_Q4_0, "Q4_0", RX_QUANT_GGUF, 32, 18, RX_GGUF_TYPE_Q4_0)                                   \
  X(GGUF_Q4_1, "Q4_1", RX_QUANT_GGUF, 32, 20, RX_GGUF_TYPE_Q4_1)                                   \
  X(GGUF_Q5_0, "Q5_0", RX_QUANT_GGUF, 32, 22, RX_GGUF_TYPE_Q5_0)                                   \
  X(GGUF_Q4_K, "Q4_K", RX_QUANT_GGUF, 256, 144, RX_GGUF_TYPE_Q4_K)                                 \
  X(GGUF_Q5_K, "Q5_K", RX_QUANT_GGUF, 256, 176, RX_GGUF_TYPE_Q5_K)                                 \
  X(GGUF_Q6_K, "Q6_K", RX_QUANT_GGUF, 256, 210, RX_GGUF_TYPE_Q6_K)                                 \
  X(AWQ_G32, "awq_g32", RX_QUANT_AWQ, 32, 18, -1) /* block bytes rounded: 16 + 2 + 0.5 */          \
  X(AWQ_G64, "awq_g64", RX_QUANT_AWQ, 64, 34, -1)                                                  \
  X(AWQ_G128, "awq_g128", RX_QUANT_AWQ, 128, 66, -1)                                               \
  X(GPTQ4, "gptq", RX_QUANT_GPTQ, 8, 4, -1) /* block: one int32 of k; groups from g_idx */         \
  X(GPTQ4_V2, "gptq_v2", RX_QUANT_GPTQ_V2, 8, 4, -1)                                               \
  X(FP8_E4M3, "fp8_e4m3", RX_QUANT_FP8, 1, 1, -1)                                                  \
  X(FP8_E4M3_CH, "fp8_e4m3_ch", RX_QUANT_FP8_CH, 1, 1, -1)

typedef enum rx_quant_scheme {
#define X(e, name, kind, block, bytes, gguf) RX_QUANT_##e,
  RX_QUANT_SCHEMES(X)
#undef X
      RX_QUANT_COUNT
} rx_quant_scheme;

typedef struct rx_quant_info {
  const char *name;
  rx_quant_kind kind;
  int block;       /* weights per block (group) along in */
  int block_bytes; /* bytes of one block, scales and zero points included */
  int gguf;        /* the rx_gguf_type, or -1 */
} rx_quant_info;

const rx_quant_info *base_quant_info_of(rx_quant_scheme s);
/* The scheme named name (exactly as in the table: "q4f16_g32", "Q4_K"); false when none. */
bool base_quant_lookup(const char *name, rx_quant_scheme *out);
/* Appends the names of every scheme, comma-separated, for messages. */
void base_quant_names(rx_strbuf *out);
/* Whether the scheme is one of relaxc's own (q4f16*, q8f16*: what --quantize writes). */
bool base_quant_is_own(rx_quant_scheme s);
/* The buffers a weight of the scheme takes (w, s, z, g: 1 to 4). */
int base_quant_nbuffers(rx_quant_scheme s);

#endif
