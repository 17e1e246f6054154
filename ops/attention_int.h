/* ops/attention_int.h: what the attention generators of ops/ share across files: the
 * FlashAttention-2 form of paged_attention (ops/attention_fa2.c) that lz_gen_paged_attention
 * (ops/attention.c) writes first, under `if has_mma(...)`. */
#ifndef RELAXC_OPS_ATTENTION_INT_H
#define RELAXC_OPS_ATTENTION_INT_H

#include "legalize_int.h"

/* Writes `if has_mma(T, f32, 16, 8, 16) { the FA2 kernel }` with the `if` left open (the caller
 * writes the else and closes it) and returns true; returns false, with nothing written, where
 * the op does not suit it (dtype not f16 / bf16, head dim not a multiple of 16, tiles beyond the
 * shared memory). */
bool lz_gen_paged_attention_fa2(lz_ctx *l);

#endif
