/* ops/attention_int.h: what the attention generators of ops/ share across files: the
 * FlashAttention-2 form of paged_attention (ops/attention_fa2.c) that lz_gen_paged_attention
 * (ops/attention.c) writes first, under `if has_mma(...)`, and its wgmma form for sm_90
 * (ops/attention_fa3.c) under `if has_wgmma(...)` before it. */
#ifndef RELAXC_OPS_ATTENTION_INT_H
#define RELAXC_OPS_ATTENTION_INT_H

#include "legalize_int.h"

/* Writes `if has_mma(T, f32, 16, 8, 16) { the FA2 kernel }` with the `if` left open (the caller
 * writes the else and closes it) and returns true; returns false, with nothing written, where
 * the op does not suit it (dtype not f16 / bf16, head dim not a multiple of 16, tiles beyond the
 * shared memory). */
bool lz_gen_paged_attention_fa2(lz_ctx *l);

/* Writes `if has_wgmma(T, f32, 64, 64, 16) { the FA3 kernel }` (ops/attention_fa3.c) with the `if`
 * left open, as above; false, with nothing written, where the op does not suit it (dtype not
 * f16 / bf16, head dim not 64 or 128). lz_gen_paged_attention writes it before FA2. */
bool lz_gen_paged_attention_fa3(lz_ctx *l);

/* The token table of a prefill attention block (ops/attention.c): per token of the block's tile,
 * in shared i32 arrays of `rows`, its sequence (tseq, -1: none), its visible key range (tlo,
 * thi: q_pos, kv_len, window), whether it is the first token of its sequence in the tile
 * (tlead), and the union of the ranges of its sequence's tokens in the tile (slo, shi); two
 * barriers. The tile's tokens are tile * tq + 0 .. ntok (text: a constant or the symbolic count
 * left), thread tx computing token tx. */
typedef struct ops_token_table {
  const char *tseq, *tlo, *thi, *tlead, *slo, *shi; /* the shared arrays */
  const char *tx, *tile;                            /* thread and tile variables */
  int64_t rows, tq;                                 /* threads that write; tokens per tile */
  const char *ntok;                                 /* the tile's tokens (text) */
  const lz_opnd *q, *qseq, *qpos, *kvlen;
  int64_t window;
} ops_token_table;
void ops_attn_token_table(lz_ctx *l, const ops_token_table *t);

/* The base-2 score (f32 text) of the dot product q.k given as text dot, under the call's scale
 * (default dflt) and softcap attributes: dot * scale * log2 e, or with a cap c > 0 (Gemma 2's
 * attn_logit_softcapping) tanh(dot * scale / c) * c * log2 e, the cap applied to the scaled score
 * before the softmax as transformers does. Every form of the paged ops writes its scores with it.
 */
const char *ops_attn_score(lz_ctx *l, double dflt, const char *dot);

#endif
