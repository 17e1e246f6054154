/* ops/attention_int.h: what the attention generators of ops/ share across files: the
 * FlashAttention-2 form of paged_attention (ops/attention_fa2.c) that lz_gen_paged_attention
 * (ops/attention.c) writes first, under `if has_mma(...)`, its wgmma form for sm_90
 * (ops/attention_fa3.c) under `if has_wgmma(...)` before it, and the block skeleton both forms
 * are written on (ops_attn_tile, ops/attention_tile.c). */
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

/* The block of a FlashAttention form of paged_attention (ops/attention_tile.c): the operands,
 * the rows of the block (a row: one query token and one query head; a GQA group's heads share
 * the block), the token table and the per-sequence key walk that FA2 (mma.sync) and FA3 (wgmma)
 * share; a form embeds it first in its own context and gives an ops_attn_form: the parameters and
 * callbacks where the two differ (keys per tile, rows per block, Q's shared layout, the MMAs). */
typedef struct ops_attn_tile ops_attn_tile;
/* What a form gives the skeleton: its block's shape and the parts where FA2 and FA3 differ. */
typedef struct ops_attn_form {
  int rows, threads; /* query rows and threads per block */
  int keys;          /* keys per tile */
  bool fence;        /* wgmma_fence (the async proxy) before each tile's barrier */
  /* the index text of chunk c of row r of qs, without the column within the chunk */
  const char *(*qidx)(ops_attn_tile *a, const char *r, const char *c);
  /* the first and last key any row of this thread's warp (FA2) or warpgroup (FA3) sees */
  void (*range)(ops_attn_tile *a, const char **lo, const char **hi);
  /* cp.async of key tile kt (text) into stage st (text) */
  void (*copy)(ops_attn_tile *a, const char *kt, const char *st);
  /* of key tile kt in stage st: S = Q K^T, the online softmax, O += P V */
  void (*scores)(ops_attn_tile *a, const char *st);
  void (*softmax)(ops_attn_tile *a, const char *kt);
  void (*pv)(ops_attn_tile *a, const char *st);
} ops_attn_form;
struct ops_attn_tile {
  const ops_attn_form *fm;
  lz_ctx *l;
  lz_opnd *q, *pages, *pt, *kvlen, *qseq, *qpos, *y;
  const char *t; /* T's name */
  int64_t d, heads, kvh, group, window;
  int64_t gr, gc, tq;         /* heads of a group per block, blocks per group, tokens */
  int64_t ch;                 /* 16-byte chunks per row of D */
  int stages;                 /* K/V tiles in shared memory (set by the form) */
  const char *tile, *kh, *tx; /* block and thread variables */
  const char *qs, *ks, *vs;   /* shared: Q rows, K and V stages */
  const char *tseq, *tlo, *thi, *tlead, *slo, *shi; /* shared, per token of the tile */
  const char *mr, *lr;                              /* registers: running max and sum */
  const char *seq, *kvl, *rok[2], *rlo[2], *rhi[2]; /* per sequence of the tile */
};
/* Form fm's block on the operands of the call (q, pages, page table, kv_len, q_seq, q_pos, y;
 * heads, D, KV heads); false where a FlashAttention form does not suit them (a scalar operand,
 * dtype not f16 / bf16, shapes not constant or heads not a multiple of the KV heads). */
bool ops_attn_tile_args(lz_ctx *l, ops_attn_tile *a, const ops_attn_form *fm);
/* After the form found D suits it: T, the chunks, the group and window, the
 * rows' split into heads and tokens, the block and thread variables and the names of the
 * skeleton's buffers and values (the form names its own after). */
void ops_attn_tile_setup(ops_attn_tile *a);
/* The block's loops over tiles, KV-head blocks and threads (three levels to close). */
void ops_attn_open_block(ops_attn_tile *a);
/* The token table's shared arrays; the running max and sum of the lane's two rows set. */
void ops_attn_alloc_table(ops_attn_tile *a);
void ops_attn_init_rows(ops_attn_tile *a);
/* Text of the row this lane holds in half h (0: g, 1: g + 8) of its warp's 16; the query token
 * and head of row r; whether row r's head exists (NULL: always). */
const char *ops_attn_lane_row(ops_attn_tile *a, int h);
const char *ops_attn_row_token(ops_attn_tile *a, const char *r);
const char *ops_attn_row_head(ops_attn_tile *a, const char *r);
const char *ops_attn_head_valid(ops_attn_tile *a, const char *r);
/* Opens `for c in 0..ceil(chunks / threads) unroll {` (and, with guard, `if e < chunks {` where
 * chunks is not a multiple of the threads; *levels: the levels to close) over the block's
 * threads, e = tx + c * threads; *r and *c: row e / ch and chunk e % ch. Returns e. */
const char *ops_attn_open_chunks(ops_attn_tile *a, int64_t chunks, bool guard, int *levels,
                                 const char **r, const char **c);
/* Q's rows into qs by cp.async at qidx (rows without a query zero-filled, their source clamped),
 * waited for. */
void ops_attn_load_q(ops_attn_tile *a);
/* The tile's token table (ops_attn_token_table), written by the first `rows` threads. */
void ops_attn_tile_table(ops_attn_tile *a);
/* The first and last key any row of this lane's warp sees in the sequence, into v[0] and v[1]
 * (warp-uniform: the lane's two rows, then shuffle_xor over the 8 quads; empty without a row). */
void ops_attn_warp_range(ops_attn_tile *a, const char *v[2]);
/* For each sequence of the tile's tokens (led by its first token u in the tile), its key tiles
 * through the cp.async stages; only the tiles that hold a key one of the range's rows sees are
 * computed. */
void ops_attn_walk(ops_attn_tile *a);
/* For row half h and accumulator element k = 2 n + e (n-tile n: key 8 n + 2 t + e of key tile
 * kt, t = lane % 4), a fresh x = the base-2 score (ops_attn_score) of the dot product in acc
 * (text) where the key is visible to the row, else the lowest finite f32; *vis: that condition
 * (text). Returns x. */
const char *ops_attn_masked_score(ops_attn_tile *a, const char *kt, int h, int k, const char *acc,
                                  const char **vis);
/* The quad's max of row half h (mx: the lane's) by shuffle_xor 1 and 2 into *mn, the new
 * running max; returns the rescale factor exp2(m_old - m_new). */
const char *ops_attn_quad_max(ops_attn_tile *a, int h, const char *mx, const char **mn);
/* The lane's two row sums over the quad, into lt. */
void ops_attn_row_sums(ops_attn_tile *a, const char *lt[2]);
/* After O / l went into qs: a barrier, then qs into y 16 bytes a thread (a `vectorize` loop
 * over the 8 elements of a chunk), rows without a token or a head skipped. */
void ops_attn_store_rows(ops_attn_tile *a);

#endif
