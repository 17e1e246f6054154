/* passes/schedule/gemm_mma.c: the GEMM of more than 16 rows on matrix units through a
 * shared-memory pipeline (matmul.h; issue 14).
 *
 * gemm_mma: P and Q plain f16 (or bf16) loads, P contiguous along k, Q along k (x @ W^T,
 * Hugging Face's [out, in] weights) or along j (x @ W, [in, out] weights with a constant column
 * count), their runs starting at multiples of 16 bytes, K a multiple of 32, on a target with
 * mma.sync m16n8k16 into f32 (CUDA sm_80 and newer). A block computes a bm x bn tile of the
 * output (gm_cfg, by row count) over GM_STAGES cp.async stages of GM_BK, ldmatrix feeding the
 * fragments from swizzled shared rows, the epilogue of matmul.h per 8 columns a lane (direct,
 * or staged over the stages: mm_staged) or, for M not a multiple of 8, staged an element a lane.
 *
 * gemm_mma_dq: the same kernel for a quantized weight (mm_q_dequant: P a plain f16/bf16 load, Q
 * the dequantized element of quant_matmul's W as [out, in] blocks, ops/quant.c, any scheme of
 * base/quant.h), Q's stage computed by the block's threads; K a multiple of 32. Also AWQ's and
 * GPTQ's int32 words (mm_q_words), whose stage lays its lanes along the columns (dq_lane,
 * word_load).
 *
 * The pipeline, the swizzle, the unrolled fragment loops and the dequantizing stage in full, with
 * their PTX figures: docs/schedules.md, "GEMM on matrix units". Not yet timed on a GPU; the PTX
 * is checked in CI (tests/unit/test_mma_stmt.c: mma.sync, cp.async, ldmatrix, no spills). */
#include "matmul.h"

#define GM_BK       32 /* k per stage: rows of 64 bytes, four 16-byte chunks */
#define GM_STAGES   3  /* shared-memory stages: 2 x 3 x 128 x 32 halves = 48 KiB at most */
#define GM_DQ_SLOTS 2  /* gemm_mma_dq: the lane slots of a thread (bn x 4 over the threads) */
#define DQ_MAX_QUAD 8  /* gemm_mma_dq: registers of quad_load (slots x Q's shared loads) */
/* Blocks per SM assumed: TGT_OCC_GEMM_MMA (128 x 128) and TGT_OCC_GEMM_MMA_64 (64 x 64) of
 * targets/occupancy.h, set on the kernel's threadIdx.x loop (`blocks=N`: CUDA's
 * __launch_bounds__(threads, N), so that ptxas keeps to the registers they leave) and checked
 * against ptxas by tests/unit/test_ptx_mma.c. */
#include "targets/occupancy.h"

#include <stdlib.h>
#include <string.h>

/* A tile configuration: the block's rows and columns, its warps along each, per row count
 * (gemm_mma_schedule): 64 rows in 4 warps of 32 x 32 up to gemm_mma_mid_rows (more blocks for the
 * columns of small batches), 128 x 128 in 8 warps of 64 x 32 above. */
typedef struct gm_cfg {
  int bm, bn, wm, wn;
} gm_cfg;
static const gm_cfg GM_SMALL = {64, 64, 2, 2}, GM_LARGE = {128, 128, 2, 4};

/* The operand's load reads runs of 8 elements (16 bytes) starting at multiples of 16 bytes along
 * v (k, or j for Q as [in, out]), v itself running over multiples of 8 (K, and M where v is j):
 * with v = 8 u + w (w in 0..8), only the last index uses w, as `+ w`, and at w = 0 it is a
 * multiple of 8, in a buffer whose last dimension is a constant multiple of 8 (every other index
 * then moves by whole multiples of 8 elements). x[i, k] passes; the flattened heads of attention's
 * output, x[i, k // 128, k % 128], do not yet: the analyzer does not split (8 u + w) // 128 into
 * (8 u) // 128 (gemm_mma_regs takes them). Also gemm_wgmma.c's. */
bool mm_runs_aligned(rx_sctx *s, const rx_tx *ld, const rx_expr *v, const rx_expr *ext) {
  if (!ld || ld->nidx < 1 || ext->kind != RX_EXPR_CONST || ext->value % 8) return false;
  const rx_expr *last = ld->buf->shape[ld->buf->ndim - 1];
  if (last->kind != RX_EXPR_CONST || last->value % 8) return false;
  const rx_expr *u = sched_fresh_var(s, "u"), *w = sched_fresh_var(s, "w");
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, u, sx_const(s->cx, 0), sx_const(s->cx, ext->value / 8));
  sym_analyzer_bind_range(s->an, w, sx_const(s->cx, 0), sx_const(s->cx, 8));
  bool ok = true;
  for (int d = 0; ok && d < ld->nidx; d++) {
    rx_tx *ix = sched_subst1_tx(s, ld->idx[d], v, sx_add(s->cx, sx_mul_c(s->cx, u, 8), w));
    if (ix->kind != RX_TX_SYM) {
      ok = !sched_tx_uses(ix, w) && d < ld->nidx - 1;
      continue;
    }
    const rx_expr *e = sym_analyzer_simplify(s->an, ix->sym);
    if (d < ld->nidx - 1) {
      ok = !sym_expr_uses_var(e, w);
    } else {
      const rx_expr *base = sym_analyzer_simplify(s->an, sym_expr_sub(s->cx, e, w));
      ok = !sym_expr_uses_var(base, w) && sym_analyzer_divisor(s->an, base) % 8 == 0;
    }
  }
  sym_analyzer_reset(s->an, mk);
  return ok;
}

bool gemm_mma_fits(rx_sctx *s, const mm_info *mi) {
  int64_t shared = (int64_t)GM_STAGES * (GM_LARGE.bm + GM_LARGE.bn) * GM_BK * 2;
  const rx_tx *q = mm_plain_load(mi->q);
  bool dq = mm_q_dequant(mi); /* Q computed into the stage: no alignment of its own to prove */
  bool q_ok = dq              ? true
              : mi->q_along_k ? mm_runs_aligned(s, q, mi->r.k, mi->K)
                              : mi->i && mm_runs_aligned(s, q, mi->j, mi->M);
  bool ops = dq ? mm_mma_target(s, mi, mm_plain_load(mi->p)->dtype) : mm_mma_operands(s, mi);
  return ops && rx_expr_is_const(mi->r.klo, 0) &&
         mm_runs_aligned(s, mm_plain_load(mi->p), mi->r.k, mi->K) && q_ok &&
         shared <= s->t->shared_bytes &&
         32 * GM_LARGE.wm * GM_LARGE.wn <= s->t->max_threads_per_block;
}

/* What the parts of the kernel share. */
typedef struct gm_k {
  rx_sctx *s;
  const mm_info *mi;
  gm_cfg cf;
  bool kn;      /* Q is [in, out] (x @ W): its tile is k x n in shared memory */
  bool dq;      /* Q dequantized (mm_q_dequant): computed into its stage (stage_dq) */
  bool wq;      /* dq from int32 words (mm_q_words: AWQ, GPTQ): stage_dq's lanes along j */
  mm_packed pk; /* dq: Q's packed loads, staged pk_bytes a lane at a time (pk.n 0: none) */
  int dq_group; /* dq: chunks whose packed bytes one load serves (stage_dq's G) */
  int pk_bytes; /* dq: bytes of each packed load a lane reads at once: 8 G / (k per byte) */
  rx_buffer *pkb[GM_DQ_SLOTS][MM_MAX_PACKED]; /* dq: those bytes in registers, per lane slot */
  rx_buffer *cwb[GM_DQ_SLOTS][MM_MAX_PACKED]; /* dq, G = 2: the chunk's 4 bytes of them */
  /* dq: the registers of quad_load, per lane slot and buffer of Q read (its scales) */
  rx_buffer *quad[DQ_MAX_QUAD];
  const rx_buffer *quad_src[DQ_MAX_QUAD];
  int quad_slot[DQ_MAX_QUAD], nquad;
  rx_stmtvec *top;                    /* the kernel's body, where quad_load allocates them */
  int mt, nt, threads;                /* mma tiles per warp; threads of the block */
  const rx_tx *p, *q;                 /* the plain loads of P and Q */
  const rx_expr *tx, *lane, *wm, *wn; /* the thread, its lane, its warp's row and column */
  const rx_expr *row0, *col0;         /* the block's first row and column */
  const rx_expr *brepl[MAXN];         /* the batch loop variables as functions of the batch block */
  rx_buffer *sa, *sb; /* the stages: [GM_STAGES, bm, GM_BK]; [.., bn, GM_BK] or [.., GM_BK, bn] */
  /* the fragments, one row each (the indexed mma and ldmatrix of ir.h, walked by loops that the
   * target's compiler unrolls): A [mt, 8], two B tiles [8], B [nt, 4], the accumulators
   * [mt * nt, 4] (tile (m, n) at row m * nt + n) */
  rx_buffer *fa, *fbx, *fb, *fc;
} gm_k;

/* The swizzled position (in elements) of chunk q of row r of a [.., rows, GM_BK] tile: chunk
 * (q + r / 2) mod 4 (rows of 64 bytes: 2 per 128-byte line). */
static const rx_expr *swz(gm_k *c, const rx_expr *r, const rx_expr *q) {
  rx_expr_ctx *cx = c->s->cx;
  return sx_mul_c(
      c->s->cx,
      sym_expr_floormod(cx, sx_add(c->s->cx, q, sym_expr_floordiv(cx, r, sx_const(c->s->cx, 2))),
                        sx_const(c->s->cx, 4)),
      8);
}

/* The same for row r of Q's [.., GM_BK, bn] tile (x @ W): chunk (q + r) mod (bn / 8), so that
 * the 8 k-rows one ldmatrix .trans phase reads at one column chunk, and the 8 consecutive chunks
 * of one cp.async phase, fall in 8 different 16-byte bank groups. */
static const rx_expr *swz_kn(gm_k *c, const rx_expr *r, const rx_expr *q) {
  return sx_mul_c(
      c->s->cx,
      sym_expr_floormod(c->s->cx, sx_add(c->s->cx, q, r), sx_const(c->s->cx, c->cf.bn / 8)), 8);
}

/* async_copy of chunk kt of P (a) or Q into stage st: each thread copies 16 bytes of
 * rows * 4 / threads of the tile's 16-byte chunks; rows past the operand's extent are zero-filled
 * and their source index clamped to its last row. */
static void copy_tile_kn(gm_k *c, const rx_expr *kt, const rx_expr *st, rx_stmtvec *out);

static void stage_dq(gm_k *c, const rx_expr *kt, const rx_expr *st, rx_stmtvec *out);

static void copy_tile(gm_k *c, const rx_expr *kt, const rx_expr *st, bool a, rx_stmtvec *out) {
  if (!a && (c->kn || c->dq)) {
    (c->dq ? stage_dq : copy_tile_kn)(c, kt, st, out);
    return;
  }
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  const mm_info *mi = c->mi;
  int rows = a ? c->cf.bm : c->cf.bn;
  const rx_expr *ext = a ? mi->N : mi->M, *first = a ? c->row0 : c->col0;
  for (int r = 0; r < rows * 4 / c->threads; r++) {
    const rx_expr *idx = sx_add(s->cx, c->tx, sx_const(s->cx, (int64_t)c->threads * r));
    const rx_expr *row =
        sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, idx, sx_const(s->cx, 4)));
    const rx_expr *q = sym_analyzer_simplify(s->an, sym_expr_floormod(cx, idx, sx_const(s->cx, 4)));
    const rx_expr *g = sx_add(s->cx, first, row);
    const rx_expr *gs = sym_expr_min(cx, g, sx_add(s->cx, ext, sx_const(s->cx, -1)));
    const rx_expr *k = sx_add(s->cx, sx_mul_c(s->cx, kt, GM_BK), sx_mul_c(s->cx, q, 8));
    rx_tx *src = a ? mm_operand_at(s, mi, c->brepl, c->p, gs, c->col0, k)
                   : mm_operand_at(s, mi, c->brepl, c->q, c->row0, gs, k);
    const rx_expr *di[3] = {st, row, swz(c, row, q)};
    rx_stmt *cp = sched_store_e(s, a ? c->sa : c->sb, di, 3, src);
    cp->kind = RX_STMT_ASYNC_COPY;
    const rx_expr *in = sched_bound_guard(s, g, ext);
    if (in && !sched_proves(s, in)) cp->cond = sched_cond(s, in);
    RX_VEC_PUSH(out, cp);
  }
}

/* Q as [in, out]: the tile's GM_BK k-rows of bn / 8 chunks of 8 columns; columns past M (a
 * multiple of 8) zero-filled, their source clamped to the last chunk. */
static void copy_tile_kn(gm_k *c, const rx_expr *kt, const rx_expr *st, rx_stmtvec *out) {
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  const mm_info *mi = c->mi;
  int per = c->cf.bn / 8;
  for (int r = 0; r < GM_BK * per / c->threads; r++) {
    const rx_expr *idx = sx_add(s->cx, c->tx, sx_const(s->cx, (int64_t)c->threads * r));
    const rx_expr *row =
        sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, idx, sx_const(s->cx, per)));
    const rx_expr *q =
        sym_analyzer_simplify(s->an, sym_expr_floormod(cx, idx, sx_const(s->cx, per)));
    const rx_expr *g = sx_add(s->cx, c->col0, sx_mul_c(s->cx, q, 8));
    const rx_expr *gs = sym_expr_min(cx, g, sx_add(s->cx, mi->M, sx_const(s->cx, -8)));
    rx_tx *src = mm_operand_at(s, mi, c->brepl, c->q, c->row0, gs,
                               sx_add(s->cx, sx_mul_c(s->cx, kt, GM_BK), row));
    const rx_expr *di[3] = {st, row, swz_kn(c, row, q)};
    rx_stmt *cp = sched_store_e(s, c->sb, di, 3, src);
    cp->kind = RX_STMT_ASYNC_COPY;
    const rx_expr *in = sched_bound_guard(s, g, mi->M);
    if (in && !sched_proves(s, in)) cp->cond = sched_cond(s, in);
    RX_VEC_PUSH(out, cp);
  }
}

/* Q dequantized (gemm_mma_dq): the threads compute the bn x GM_BK tile of chunk kt into stage st,
 * converted to P's dtype, each lane 8 consecutive k (16 bytes: one chunk) at a time, stored at
 * once (a 128-bit st.shared) at the swizzled position that copy_tile's cp.async would give the
 * chunk, so that ldmatrix reads them as it reads copied ones and a phase of 8 lanes (rows 2i and
 * 2i + 1, their 4 chunks each) falls in 8 different 16-byte bank groups.
 *
 * The lanes are laid along k: lane slot (row, p) = thread + threads x r (r < GM_DQ_SLOTS), row =
 * slot / 4, p = slot % 4 (chunk p of the row), so that a warp covers 8 rows x 4 lanes. With
 * packed weights (gemv_packed.c: relaxc's int4 and int8 schemes) the 4 lanes of a row read 32
 * contiguous bytes, whole sectors, each byte once:
 *   int8 (G = 1): lane p reads its chunk's 8 bytes into registers (one 64-bit load);
 *   int4 (G = 2, where the chunk count is even): a chunk is 4 bytes, so every other chunk lane p
 *     reads 8 bytes, piece pi(p) = 2 (p % 2) + p / 2 of its row's 32 bytes for the two chunks:
 *     the even lanes hold the first chunk's words, the odd ones the second's; each chunk, lane p
 *     takes its own word where p % 2 is the chunk's place in the pair, else its neighbour's
 *     (one shuffle_xor of a 32-bit word with lane p ^ 1), and dequantizes from those 4 bytes.
 *     With an odd chunk count (G = 1) lane p reads its chunk's 4 bytes: half sectors.
 * The other loads of Q (scales, zero points, GGUF's blocks) are those of the element, the ones
 * the 8 elements share read once before them. Columns past M compute the last column (finite;
 * the epilogue stores none of them). The stores are plain: the barrier that opens the step which
 * reads stage st (two steps on) makes them visible, as cp.async's wait does P's. */
#define DQ_MAX_RANK  8  /* hoisted loads: of buffers up to this rank (Q's scales: 2 or 3) */
#define DQ_QUAD      4  /* chunks whose shared loads (a scale a group) one load of a lane serves */
#define DQ_MAX_WORDS 16 /* word form: the distinct loads of an element (AWQ 4, GPTQ 5) */
typedef struct dq_hoist {
  gm_k *c;
  const rx_expr *v;           /* the element of the chunk */
  const rx_expr *kt, *p, *gs; /* the chunk, the lane's chunk of it, the row of Q */
  int slot;
  rx_stmtvec *lets;
  /* the word form's loads read so far (word_load), as rewritten, and what replaces them */
  const rx_tx *seen[DQ_MAX_WORDS];
  rx_tx *as[DQ_MAX_WORDS];
  int nseen;
} dq_hoist;

typedef struct dq_find {
  const rx_buffer *buf;
  const rx_tx *load;
  int n;
} dq_find;

static bool find_buf(const rx_tx *l, void *ud) {
  dq_find *f = ud;
  if (l->buf == f->buf) f->load = l, f->n++;
  return true;
}

/* The simplified indices of Q's load L at the row and k (false: not all symbolic). */
static bool dq_index(gm_k *c, const rx_tx *L, const rx_expr *gs, const rx_expr *k,
                     const rx_expr **at) {
  rx_tx *x = mm_operand_at(c->s, c->mi, c->brepl, L, c->row0, gs, k);
  if (x->kind != RX_TX_LOAD || x->nidx > DQ_MAX_RANK) return false;
  for (int i = 0; i < x->nidx; i++) {
    if (x->idx[i]->kind != RX_TX_SYM) return false;
    at[i] = sym_analyzer_simplify(c->s->an, x->idx[i]->sym);
  }
  return true;
}

/* A load the chunk's 8 elements share, of Q's load L, the same for every chunk of a stage (a
 * scale a group of 32 or more): lane p of each row reads it for chunk DQ_QUAD (kt // DQ_QUAD) + p
 * into a register, once every DQ_QUAD chunks (the 4 lanes of a row: 4 consecutive scales), and
 * chunk kt takes lane kt % DQ_QUAD's of its row with two shuffle_xor (1, then 2). */
static rx_tx *quad_load(dq_hoist *h, const rx_tx *L, rx_tx *l) {
  gm_k *c = h->c;
  rx_sctx *s = c->s;
  rx_module *m = s->m;
  rx_expr_ctx *cx = s->cx;
  rx_buffer **qb = NULL;
  for (int i = 0; i < c->nquad; i++)
    if (c->quad_src[i] == l->buf && c->quad_slot[i] == h->slot) qb = &c->quad[i];
  if (!qb) {
    if (c->nquad == DQ_MAX_QUAD) return NULL;
    int64_t one[1] = {1};
    rx_stmt *al;
    c->quad_src[c->nquad] = l->buf;
    c->quad_slot[c->nquad] = h->slot;
    qb = &c->quad[c->nquad++];
    *qb = sched_alloc(s, "qs", l->dtype, RX_SCOPE_LOCAL, one, 1, &al);
    RX_VEC_PUSH(c->top, al); /* first: the pipeline's prologue already uses it */
    memmove(c->top->data + 1, c->top->data, (c->top->len - 1) * sizeof *c->top->data);
    c->top->data[0] = al;
  }
  const rx_expr *sub = sym_expr_floormod(cx, h->kt, sx_const(cx, DQ_QUAD));
  const rx_expr *kq = sym_expr_min(cx, sx_add(cx, sym_expr_sub(cx, h->kt, sub), h->p),
                                   sx_const(cx, c->mi->K->value / GM_BK - 1));
  const rx_expr *z = sx_const(cx, 0);
  RX_VEC_PUSH(h->lets, sched_guard(s, sym_expr_cmp(cx, RX_EXPR_EQ, sub, z),
                                   sched_store_e(s, *qb, &z, 1,
                                                 mm_operand_at(s, c->mi, c->brepl, L, c->row0,
                                                               h->gs, sx_mul_c(cx, kq, GM_BK)))));
  rx_tx *x = sched_load(s, *qb, &z, 1);
  for (int b = 1; b <= 2; b *= 2) { /* lane p takes bit b of kt % 4 from lane p ^ b */
    rx_tx *args[2] = {x, ir_tx_int(m, b, RX_DTYPE_I32, false, s->loc)};
    rx_local *t = sched_local(s, "qs", l->dtype), *y = sched_local(s, "qs", l->dtype);
    RX_VEC_PUSH(h->lets, sched_let(s, t, ir_tx_call(m, RX_INTRIN_SHUFFLE_XOR, args, 2, s->loc)));
    const rx_expr *bp =
        sym_expr_floormod(cx, sym_expr_floordiv(cx, h->p, sx_const(cx, b)), sx_const(cx, 2));
    const rx_expr *bs =
        sym_expr_floormod(cx, sym_expr_floordiv(cx, sub, sx_const(cx, b)), sx_const(cx, 2));
    RX_VEC_PUSH(
        h->lets,
        sched_let(s, y,
                  ir_tx_select(m, ir_tx_sym(m, sym_expr_cmp(cx, RX_EXPR_EQ, bp, bs), s->loc), x,
                               ir_tx_local(m, t, s->loc), s->loc)));
    x = ir_tx_local(m, y, s->loc);
  }
  return x;
}

/* The word form (c->wq): every global load of the element read once, before the chunk's
 * vectorized loop, by every lane: one that the 8 elements share into a local, one that moves with
 * the element (AWQ's word of row k, GPTQ's g_idx[k] and the scale and zero of its group: l's
 * indices already read the staged g_idx) into a local array of 8 by an unrolled loop. Each is then
 * one request of the whole warp (32 consecutive columns: AWQ's 4 words, GPTQ's 32, the scales' 64
 * bytes, a g_idx broadcast), where the element's selects among the 8 fields would otherwise read
 * it in a branch of its own for some of the lanes. The same load twice (GPTQ's word in each of
 * field4's arms) is read once. */
static rx_tx *word_load(rx_rewrite *rw, dq_hoist *h, rx_tx *l) {
  rx_sctx *s = rw->s;
  for (int i = 0; i < h->nseen; i++)
    if (mm_same_tx(h->seen[i], l)) return h->as[i];
  if (h->nseen == DQ_MAX_WORDS) return l;
  bool moves = false;
  for (int i = 0; i < l->nidx; i++) moves |= sched_tx_uses(l->idx[i], h->v);
  rx_tx *r;
  if (!moves) {
    rx_local *loc = sched_local(s, "qs", l->dtype);
    RX_VEC_PUSH(h->lets, sched_let(s, loc, l));
    r = ir_tx_local(s->m, loc, s->loc);
  } else {
    int64_t eight[1] = {8};
    rx_stmt *al;
    rx_buffer *b = sched_alloc(s, "qv", l->dtype, RX_SCOPE_LOCAL, eight, 1, &al);
    RX_VEC_PUSH(h->lets, al);
    const rx_expr *u = sched_fresh_var(s, "u");
    size_t mk = sym_analyzer_mark(s->an);
    sym_analyzer_bind_range(s->an, u, sx_const(s->cx, 0), sx_const(s->cx, 8));
    rx_stmt *st = sched_store_e(s, b, &u, 1, sched_subst1_tx(s, l, h->v, u));
    sym_analyzer_reset(s->an, mk);
    RX_VEC_PUSH(h->lets, sched_for(s, u, sx_const(s->cx, 8), RX_LOOP_UNROLL, st));
    r = sched_load(s, b, &h->v, 1);
  }
  h->seen[h->nseen] = l;
  h->as[h->nseen++] = r;
  return r;
}

/* A load of global memory that the chunk's 8 elements share: read once (quad_load where every
 * chunk of the stage shares it, else into a local before the chunk); the word form's loads by
 * word_load. */
static rx_tx *hoist_load(rx_rewrite *rw, rx_tx *l) {
  dq_hoist *h = rw->ud;
  gm_k *c = h->c;
  const rx_expr *at[DQ_MAX_RANK], *at0[DQ_MAX_RANK];
  if (l->buf->scope != RX_SCOPE_GLOBAL || l->nidx > DQ_MAX_RANK) return l;
  if (c->wq) return word_load(rw, h, l);
  for (int i = 0; i < l->nidx; i++) {
    const rx_tx *x = l->idx[i];
    if (x->kind != RX_TX_SYM) return l;
    at[i] = sym_analyzer_simplify(rw->s->an, x->sym); /* (32 kt + 8 p + v) // 32 is kt */
    if (sym_expr_uses_var(at[i], h->v)) return l;
  }
  dq_find f = {l->buf, NULL, 0};
  sched_all_loads(c->mi->q, find_buf, &f);
  bool same = f.n == 1 && dq_index(c, f.load, h->gs, sx_mul_c(rw->s->cx, h->kt, GM_BK), at0);
  for (int i = 0; same && i < l->nidx; i++) same = at0[i] == at[i];
  rx_tx *q = same ? quad_load(h, f.load, l) : NULL;
  if (q) return q;
  rx_local *loc = sched_local(rw->s, "qs", l->dtype);
  RX_VEC_PUSH(h->lets, sched_let(rw->s, loc, sched_load(rw->s, l->buf, at, l->nidx)));
  return ir_tx_local(rw->s->m, loc, rw->s->loc);
}

/* Chunk p of the row into stage st: its 8 elements from k = kb on, the packed bytes read from
 * bufs (NULL: Q's own loads), stored with one vectorized loop (appended to out). */
static void stage_chunk(gm_k *c, const rx_expr *st, const rx_expr *kt, int slot, const rx_expr *row,
                        const rx_expr *gs, const rx_expr *p, rx_buffer *const *bufs, int bytes,
                        rx_stmtvec *out) {
  rx_sctx *s = c->s;
  const mm_info *mi = c->mi;
  const rx_expr *kb = sx_add(s->cx, sx_mul_c(s->cx, kt, GM_BK), sx_mul_c(s->cx, p, 8));
  const rx_expr *v = sched_fresh_var(s, "v");
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, v, sx_const(s->cx, 0), sx_const(s->cx, 8));
  rx_tx *val;
  if (bufs) /* its copies of the bytes are the caller's */
    (void)mm_packed_stage(s, mi, &c->pk, bufs, bytes, c->brepl, gs, kb, v, 1,
                          (const rx_tx *const[]){mi->q}, &val);
  else
    val = mm_operand_at(s, mi, c->brepl, mi->q, c->row0, gs, sx_add(s->cx, kb, v));
  dq_hoist h = {.c = c, .v = v, .kt = kt, .p = p, .gs = gs, .slot = slot, .lets = out};
  rx_rewrite rw = {.s = s, .n = 0, .hook = hoist_load, .ud = &h};
  val = sched_rewrite_tx(&rw, val);
  if (val->dtype != c->sb->dtype) val = ir_tx_cast(s->m, c->sb->dtype, val, s->loc);
  const rx_expr *di[3] = {st, row, sx_add(s->cx, swz(c, row, p), v)};
  RX_VEC_PUSH(out, sched_for(s, v, sx_const(s->cx, 8), RX_LOOP_VECTORIZE,
                             sched_store_e(s, c->sb, di, 3, val)));
  sym_analyzer_reset(s->an, mk);
}

/* u32 word w (0, 1) of the 8 bytes in b: its bytes 4 w .. 4 w + 3, little-endian. */
static rx_tx *dq_word(rx_sctx *s, rx_buffer *b, int w) {
  rx_tx *acc = NULL;
  for (int i = 3; i >= 0; i--) {
    const rx_expr *at = sx_const(s->cx, 4 * w + i);
    rx_tx *byte = ir_tx_cast(s->m, RX_DTYPE_U32, sched_load(s, b, &at, 1), s->loc);
    acc =
        acc ? ir_tx_binary(s->m, RX_BINOP_ADD,
                           ir_tx_binary(s->m, RX_BINOP_MUL, acc,
                                        ir_tx_int(s->m, 256, RX_DTYPE_U32, false, s->loc), s->loc),
                           byte, s->loc)
            : byte;
  }
  return acc;
}

/* int4 with G = 2: chunk kt's 4 bytes of lane p into cw (u8[4]) from the 8 of its pair's piece
 * in b: its own word sub (kt's place in the pair) where p % 2 == sub, else lane p ^ 1's. */
static void dq_exchange(gm_k *c, rx_buffer *b, rx_buffer *cw, const rx_expr *p, const rx_expr *sub,
                        rx_stmtvec *out) {
  rx_sctx *s = c->s;
  rx_module *m = s->m;
  rx_tx *first = ir_tx_binary(m, RX_BINOP_EQ, ir_tx_sym(m, sub, s->loc),
                              ir_tx_int(m, 0, RX_DTYPE_I64, true, s->loc), s->loc);
  rx_tx *w0 = dq_word(s, b, 0), *w1 = dq_word(s, b, 1);
  rx_tx *args[2] = {ir_tx_select(m, first, w1, w0, s->loc),
                    ir_tx_int(m, 1, RX_DTYPE_I32, false, s->loc)};
  rx_local *other = sched_local(s, "qw", RX_DTYPE_U32), *pick = sched_local(s, "qw", RX_DTYPE_U32);
  RX_VEC_PUSH(out, sched_let(s, other, ir_tx_call(m, RX_INTRIN_SHUFFLE_XOR, args, 2, s->loc)));
  rx_tx *own = ir_tx_binary(m, RX_BINOP_EQ,
                            ir_tx_sym(m, sym_expr_floormod(s->cx, p, sx_const(s->cx, 2)), s->loc),
                            ir_tx_sym(m, sub, s->loc), s->loc);
  RX_VEC_PUSH(out, sched_let(s, pick,
                             ir_tx_select(m, own, ir_tx_select(m, first, w0, w1, s->loc),
                                          ir_tx_local(m, other, s->loc), s->loc)));
  for (int i = 0; i < 4; i++) {
    rx_tx *shifted =
        ir_tx_binary(m, RX_BINOP_FLOORDIV, ir_tx_local(m, pick, s->loc),
                     ir_tx_int(m, (int64_t)1 << (8 * i), RX_DTYPE_U32, false, s->loc), s->loc);
    rx_tx *byte = ir_tx_binary(m, RX_BINOP_FLOORMOD, shifted,
                               ir_tx_int(m, 256, RX_DTYPE_U32, false, s->loc), s->loc);
    const rx_expr *at = sx_const(s->cx, i);
    RX_VEC_PUSH(out, sched_store_e(s, cw, &at, 1, ir_tx_cast(m, cw->dtype, byte, s->loc)));
  }
}

/* Lane slot r of the thread: its row of Q's tile (a column j of the output) and its chunk p of
 * the row. Bytes along k (relaxc's schemes, GGUF, FP8): slot tx + threads r at row slot / 4,
 * chunk slot % 4 (a row's 4 lanes read its 32 contiguous bytes). The word form (c->wq: AWQ's
 * qweight[k, j / 8], GPTQ's qweight[k / 8, j], their zeros [group, j / 8] and scales
 * [group, j]: contiguous along j, not k): lanes along j, row (bn / 2) r + tx % (bn / 2), chunk
 * p = tx / (bn / 2), the same for a warp, so that a warp's 32 lanes read 32 consecutive columns
 * (word_load: AWQ's 4 words of a k row, GPTQ's 128 contiguous bytes, the scales' 64); an 8-lane
 * phase of the 16-byte shared stores then writes rows 8i .. 8i + 7 at chunk (p + row / 2) % 4 of
 * their 64-byte halves of 4 lines: 8 different 16-byte bank groups. */
static void dq_lane(gm_k *c, int r, const rx_expr **row, const rx_expr **p) {
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  if (!c->wq) {
    const rx_expr *idx = sx_add(cx, c->tx, sx_const(cx, (int64_t)c->threads * r));
    *row = sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, idx, sx_const(cx, 4)));
    *p = sym_analyzer_simplify(s->an, sym_expr_floormod(cx, idx, sx_const(cx, 4)));
    return;
  }
  const rx_expr *half = sx_const(cx, c->cf.bn / 2);
  *row = sym_analyzer_simplify(
      s->an, sx_add(cx, sym_expr_floormod(cx, c->tx, half), sx_const(cx, (c->cf.bn / 2) * r)));
  *p = sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, c->tx, half));
}

static void stage_dq(gm_k *c, const rx_expr *kt, const rx_expr *st, rx_stmtvec *out) {
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  const mm_info *mi = c->mi;
  int G = c->dq_group;
  const rx_expr *sub = sym_expr_floormod(cx, kt, sx_const(s->cx, G)); /* kt's place in its group */
  const rx_expr *k0 = sx_mul_c(s->cx, sym_expr_floordiv(cx, kt, sx_const(s->cx, G)), 32 * G);
  rx_stmtvec loads = {0}, work = {0};
  for (int r = 0; r < GM_DQ_SLOTS; r++) {
    const rx_expr *row, *p;
    dq_lane(c, r, &row, &p);
    const rx_expr *gs =
        sym_expr_min(cx, sx_add(s->cx, c->col0, row), sx_add(s->cx, mi->M, sx_const(s->cx, -1)));
    const rx_expr *kb = sx_add(s->cx, sx_mul_c(s->cx, kt, GM_BK), sx_mul_c(s->cx, p, 8));
    if (!c->pk.n) {
      stage_chunk(c, st, kt, r, row, gs, p, NULL, 0, &work);
      continue;
    }
    /* the bytes: at kb (G = 1), or at piece pi(p) of the pair (G = 2) */
    const rx_expr *pi =
        sx_add(s->cx, sx_mul_c(s->cx, sym_expr_floormod(cx, p, sx_const(s->cx, 2)), 2),
               sym_expr_floordiv(cx, p, sx_const(s->cx, 2)));
    const rx_expr *kl = G == 1 ? kb : sx_add(s->cx, k0, sx_mul_c(s->cx, pi, 16));
    rx_tx *unused;
    RX_VEC_PUSH(&loads,
                mm_packed_stage(s, mi, &c->pk, c->pkb[r], c->pk_bytes, c->brepl, gs, kl,
                                sx_const(s->cx, 0), 1, (const rx_tx *const[]){mi->q}, &unused));
    if (G == 1) {
      stage_chunk(c, st, kt, r, row, gs, p, c->pkb[r], c->pk_bytes, &work);
      continue;
    }
    for (int i = 0; i < c->pk.n; i++) dq_exchange(c, c->pkb[r][i], c->cwb[r][i], p, sub, &work);
    stage_chunk(c, st, kt, r, row, gs, p, c->cwb[r], 4, &work);
  }
  if (loads.len) {
    rx_stmt *l = sched_seq(s, &loads);
    if (G > 1) l = sched_guard(s, sym_expr_cmp(cx, RX_EXPR_EQ, sub, sx_const(s->cx, 0)), l);
    RX_VEC_PUSH(out, l);
  }
  for (size_t i = 0; i < work.len; i++) RX_VEC_PUSH(out, work.data[i]);
  free(work.data);
}

rx_stmt *mm_stmt_count(rx_sctx *s, rx_stmt_kind k, int count) {
  rx_stmt *st = ir_stmt_new(s->m, k, s->loc);
  st->count = count;
  return st;
}

/* A fragment's row r as the index of an indexed mma or ldmatrix (ir.h). */
static rx_tx **frag_rows(rx_sctx *s, const rx_expr *const *r, int n) {
  rx_tx **idx = base_arena_alloc(&s->m->arena, (size_t)n * sizeof *idx);
  for (int i = 0; i < n; i++) idx[i] = ir_tx_sym(s->m, r[i], s->loc);
  return idx;
}

/* ldmatrix x4 of f's row fr (NULL: f whole) from buf[st, row, col] (col: the swizzled
 * position), transposed for Q's k x n tile (x @ W). */
static rx_stmt *ldsm(gm_k *c, rx_buffer *f, const rx_expr *fr, rx_buffer *buf, const rx_expr *st,
                     const rx_expr *row, const rx_expr *col, bool trans) {
  rx_stmt *l = mm_stmt_count(c->s, RX_STMT_LDMATRIX, 4);
  l->buf = f;
  l->trans = trans;
  if (fr) {
    l->idx = frag_rows(c->s, &fr, 1);
    l->nidx = 1;
  }
  const rx_expr *i[3] = {st, row, col};
  l->value = sched_load(c->s, buf, i, 3);
  return l;
}

const rx_expr *mm_bound_var(rx_sctx *s, const char *name, int n) {
  const rx_expr *v = sched_fresh_var(s, name);
  sym_analyzer_bind_range(s->an, v, sx_const(s->cx, 0), sx_const(s->cx, n));
  return v;
}

/* `for v in 0..n unroll { body }`: the loops over a warp's fragments, which the target's compiler
 * unrolls (its registers then indexed by constants: no local memory). */
static rx_stmt *unrolled(rx_sctx *s, const rx_expr *v, int n, rx_stmtvec *body) {
  return sched_for(s, v, sx_const(s->cx, n), RX_LOOP_UNROLL, sched_seq(s, body));
}

/* The B fragments of step ks for tile pair np: lane l gives row 8 (l / 16) + l % 8 (n), chunk
 * 2 ks + l / 8 % 2 (k) of two 8 x 16 tiles; for the k x n tile (x @ W), .trans with row
 * 16 ks + 8 (l / 8 % 2) + l % 8 (k), column chunk 2 np + l / 16 (n). Registers 0, 1 are tile
 * 2 np's b0..b3, 2, 3 tile 2 np + 1's. */
static void load_b(gm_k *c, const rx_expr *st, const rx_expr *ks, const rx_expr *np,
                   rx_stmtvec *out) {
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  const rx_expr *hi = sym_expr_floordiv(cx, c->lane, sx_const(s->cx, 16));
  const rx_expr *l8 = sym_expr_floormod(cx, c->lane, sx_const(s->cx, 8));
  const rx_expr *mid =
      sym_expr_floormod(cx, sym_expr_floordiv(cx, c->lane, sx_const(s->cx, 8)), sx_const(s->cx, 2));
  if (c->kn) {
    const rx_expr *row =
        sx_add(s->cx, sx_mul_c(s->cx, ks, 16), sx_add(s->cx, sx_mul_c(s->cx, mid, 8), l8));
    const rx_expr *q =
        sx_add(s->cx, sx_add(s->cx, sx_mul_c(s->cx, c->wn, c->nt), sx_mul_c(s->cx, np, 2)), hi);
    RX_VEC_PUSH(out, ldsm(c, c->fbx, NULL, c->sb, st, row, swz_kn(c, row, q), true));
  } else {
    const rx_expr *row =
        sx_add(s->cx, sx_add(s->cx, sx_mul_c(s->cx, c->wn, c->nt * 8), sx_mul_c(s->cx, np, 16)),
               sx_add(s->cx, sx_mul_c(s->cx, hi, 8), l8));
    const rx_expr *q = sx_add(s->cx, sx_mul_c(s->cx, ks, 2), mid);
    RX_VEC_PUSH(out, ldsm(c, c->fbx, NULL, c->sb, st, row, swz(c, row, q), false));
  }
  const rx_expr *h = mm_bound_var(s, "h", 2), *i = mm_bound_var(s, "i", 4);
  const rx_expr *di[2] = {sx_add(s->cx, sx_mul_c(s->cx, np, 2), h), i},
                *src = sx_add(s->cx, i, sx_mul_c(s->cx, h, 4));
  rx_stmtvec cp = {0}, hs = {0};
  RX_VEC_PUSH(&cp, sched_store_e(s, c->fb, di, 2, sched_load(s, c->fbx, &src, 1)));
  RX_VEC_PUSH(&hs, unrolled(s, i, 4, &cp));
  RX_VEC_PUSH(out, unrolled(s, h, 2, &hs));
}

/* The mma work on stage st: GM_BK / 16 steps of mt x nt mma each, as loops over ks, the
 * fragments and the tiles. */
static void compute(gm_k *c, const rx_expr *st, rx_stmtvec *out) {
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  size_t mk = sym_analyzer_mark(s->an);
  const rx_expr *l16 = sym_expr_floormod(cx, c->lane, sx_const(s->cx, 16));
  const rx_expr *hi = sym_expr_floordiv(cx, c->lane, sx_const(s->cx, 16));
  const rx_expr *ks = mm_bound_var(s, "ks", GM_BK / 16);
  rx_stmtvec step = {0}, la = {0}, lb = {0}, mn = {0}, mm = {0};
  /* A: lane l gives row l % 16, chunk 2 ks + l / 16 of the 16 x 16 tile (a0..a7) */
  const rx_expr *m = mm_bound_var(s, "m", c->mt);
  const rx_expr *row =
      sx_add(s->cx, sx_add(s->cx, sx_mul_c(s->cx, c->wm, c->mt * 16), sx_mul_c(s->cx, m, 16)), l16);
  RX_VEC_PUSH(&la, ldsm(c, c->fa, m, c->sa, st, row,
                        swz(c, row, sx_add(s->cx, sx_mul_c(s->cx, ks, 2), hi)), false));
  RX_VEC_PUSH(&step, unrolled(s, m, c->mt, &la));
  const rx_expr *np = mm_bound_var(s, "np", c->nt / 2);
  load_b(c, st, ks, np, &lb);
  RX_VEC_PUSH(&step, unrolled(s, np, c->nt / 2, &lb));
  const rx_expr *m2 = mm_bound_var(s, "m", c->mt), *n = mm_bound_var(s, "n", c->nt);
  rx_stmt *mma = ir_stmt_new(s->m, RX_STMT_MMA, s->loc);
  mma->buf = c->fc;
  mma->mma_a = c->fa;
  mma->mma_b = c->fb;
  const rx_expr *rows[3] = {sx_add(s->cx, sx_mul_c(s->cx, m2, c->nt), n), m2, n};
  mma->idx = frag_rows(s, rows, 3);
  mma->nidx = 3;
  RX_VEC_PUSH(&mn, mma);
  RX_VEC_PUSH(&mm, unrolled(s, n, c->nt, &mn));
  RX_VEC_PUSH(&step, unrolled(s, m2, c->mt, &mm));
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(out, unrolled(s, ks, GM_BK / 16, &step));
}

void mm_pipeline_emit(rx_sctx *s, int64_t nk, const mm_pipeline *p, rx_stmtvec *body) {
  for (int st = 0; st < p->stages - 1; st++) {
    if (st < nk) p->issue(p->ctx, sx_const(s->cx, st), sx_const(s->cx, st), body);
    RX_VEC_PUSH(body, mm_stmt_count(s, RX_STMT_ASYNC_COMMIT, 0));
  }
  const rx_expr *kt = sched_fresh_var(s, "kt");
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, kt, sx_const(s->cx, 0), sx_const(s->cx, nk));
  rx_stmtvec it = {0}, ahead = {0};
  RX_VEC_PUSH(&it, mm_stmt_count(s, RX_STMT_ASYNC_WAIT, p->stages - 2));
  if (p->fence != RX_STMT_SEQ) RX_VEC_PUSH(&it, mm_stmt_count(s, p->fence, 0));
  RX_VEC_PUSH(&it, sched_barrier(s));
  const rx_expr *nx = sx_add(s->cx, kt, sx_const(s->cx, p->stages - 1));
  p->issue(p->ctx, nx, sym_expr_floormod(s->cx, nx, sx_const(s->cx, p->stages)), &ahead);
  RX_VEC_PUSH(&it, sched_guard(s, sx_lt(s->cx, nx, sx_const(s->cx, nk)), sched_seq(s, &ahead)));
  RX_VEC_PUSH(&it, mm_stmt_count(s, RX_STMT_ASYNC_COMMIT, 0));
  p->compute(p->ctx, sym_expr_floormod(s->cx, kt, sx_const(s->cx, p->stages)), &it);
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(body, sched_for(s, kt, sx_const(s->cx, nk),
                              p->rolled ? RX_LOOP_ROLLED : RX_LOOP_SERIAL, sched_seq(s, &it)));
  RX_VEC_PUSH(body, mm_stmt_count(s, RX_STMT_ASYNC_WAIT, 0)); /* nothing left in flight */
}

/* Both operands' copies of chunk kt into stage st (mm_pipeline's issue). */
static void issue_chunk(void *ctx, const rx_expr *kt, const rx_expr *st, rx_stmtvec *out) {
  copy_tile(ctx, kt, st, true, out);
  copy_tile(ctx, kt, st, false, out);
}

static void compute_stage(void *ctx, const rx_expr *st, rx_stmtvec *out) { compute(ctx, st, out); }

/* The pipeline over K / GM_BK chunks (mm_pipeline_emit): GM_STAGES stages. */
static void pipeline(gm_k *c, rx_stmtvec *body) {
  mm_pipeline p = {GM_STAGES, RX_STMT_SEQ, c, issue_chunk, compute_stage, true};
  mm_pipeline_emit(c->s, c->mi->K->value / GM_BK, &p, body);
}

/* Where the output's rows are not whole 16-byte runs (M not a multiple of 8: no vector store
 * can be proved aligned) and the tile cannot be staged (epilogue_frag_form: no 4 tiles a quad, or
 * rows of a pass not whole for the warps), the epilogue at each accumulator's point, its pair of
 * columns 2 t,
 * 2 t + 1 (the quad's 8 columns of a tile in two stores): accumulator i of tile (m, n) is the
 * output point (row0 + 16 (mt wm + m) + g + 8 (i // 2),
 * col0 + 8 (nt wn + n) + 2 t + i % 2), g = lane / 4, t = lane % 4: loops over m, n and i. */
static void epilogue_frag(gm_k *c, rx_stmtvec *body) {
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  const mm_info *mi = c->mi;
  const rx_expr *g = sym_expr_floordiv(cx, c->lane, sx_const(s->cx, 4));
  const rx_expr *t = sym_expr_floormod(cx, c->lane, sx_const(s->cx, 4));
  size_t mk = sym_analyzer_mark(s->an);
  const rx_expr *m = mm_bound_var(s, "m", c->mt), *n = mm_bound_var(s, "n", c->nt);
  const rx_expr *i = mm_bound_var(s, "i", 4);
  const rx_expr *row =
      sx_add(s->cx,
             sx_add(s->cx, c->row0,
                    sx_add(s->cx, sx_mul_c(s->cx, c->wm, c->mt * 16), sx_mul_c(s->cx, m, 16))),
             sx_add(s->cx, g, sx_mul_c(s->cx, sym_expr_floordiv(cx, i, sx_const(s->cx, 2)), 8)));
  const rx_expr *col =
      sx_add(s->cx,
             sx_add(s->cx, c->col0,
                    sx_add(s->cx, sx_mul_c(s->cx, c->wn, c->nt * 8), sx_mul_c(s->cx, n, 8))),
             sx_add(s->cx, sx_mul_c(s->cx, t, 2), sym_expr_floormod(cx, i, sx_const(s->cx, 2))));
  const rx_expr *vars[MAXN], *repl[MAXN];
  rx_rewrite rw;
  mm_point_rewrite(s, mi, c->brepl, row, col, vars, repl, &rw);
  rx_stmtvec fin = {0}, is = {0}, ns = {0}, ms = {0};
  const rx_expr *fi[2] = {sx_add(s->cx, sx_mul_c(s->cx, m, c->nt), n), i};
  mm_epilogue(s, mi, &rw, sched_load(s, c->fc, fi, 2), &fin);
  const rx_expr *in =
      sx_and_opt(s->cx, sched_bound_guard(s, row, mi->N), sched_bound_guard(s, col, mi->M));
  RX_VEC_PUSH(&is, sched_guard(s, in, sched_seq(s, &fin)));
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(&ns, unrolled(s, i, 4, &is));
  RX_VEC_PUSH(&ms, unrolled(s, n, c->nt, &ns));
  RX_VEC_PUSH(body, unrolled(s, m, c->mt, &ms));
}

/* mm_quad_transpose (matmul.h). Round b of the two: the pair of slot k (k without bit b) and
 * slot k ^ b: a lane with bit b of t clear keeps slot k and sends slot k ^ b, one with it set
 * keeps k ^ b and sends k; each takes its partner's into the slot it sent (the pair of lane s,
 * slot d ends in lane d, slot s). */
void mm_quad_transpose(rx_sctx *s, const rx_expr *lane, rx_tx *const *src, rx_buffer *ft,
                       rx_stmtvec *out) {
  rx_module *md = s->m;
  rx_expr_ctx *cx = s->cx;
  const rx_expr *t = sym_expr_floormod(cx, lane, sx_const(cx, 4));
  for (int j = 0; j < 8; j++) {
    const rx_expr *di = sx_const(cx, j);
    RX_VEC_PUSH(out, sched_store_e(s, ft, &di, 1, src[j]));
  }
  for (int b = 1; b <= 2; b *= 2) {
    rx_tx *set =
        ir_tx_sym(md,
                  sym_expr_cmp(cx, RX_EXPR_EQ,
                               sym_expr_floormod(cx, sym_expr_floordiv(cx, t, sx_const(cx, b)),
                                                 sx_const(cx, 2)),
                               sx_const(cx, 1)),
                  s->loc);
    for (int k = 0; k < 4; k++) {
      if (k & b) continue;
      for (int e = 0; e < 2; e++) {
        const rx_expr *lo = sx_const(cx, 2 * k + e), *hi = sx_const(cx, 2 * (k ^ b) + e);
        rx_local *snd = sched_local(s, "xs", RX_DTYPE_F32),
                 *rcv = sched_local(s, "xr", RX_DTYPE_F32);
        RX_VEC_PUSH(out, sched_let(s, snd,
                                   ir_tx_select(md, set, sched_load(s, ft, &lo, 1),
                                                sched_load(s, ft, &hi, 1), s->loc)));
        rx_tx *args[2] = {ir_tx_local(md, snd, s->loc),
                          ir_tx_int(md, b, RX_DTYPE_I32, false, s->loc)};
        RX_VEC_PUSH(out, sched_let(s, rcv, ir_tx_call(md, RX_INTRIN_SHUFFLE_XOR, args, 2, s->loc)));
        rx_tx *r = ir_tx_local(md, rcv, s->loc);
        RX_VEC_PUSH(out,
                    sched_store_e(s, ft, &lo, 1,
                                  ir_tx_select(md, set, r, sched_load(s, ft, &lo, 1), s->loc)));
        RX_VEC_PUSH(out,
                    sched_store_e(s, ft, &hi, 1,
                                  ir_tx_select(md, set, sched_load(s, ft, &hi, 1), r, s->loc)));
      }
    }
  }
}

rx_stmt *mm_epilogue_row8(rx_sctx *s, const mm_info *mi, const rx_expr *const *batch,
                          const rx_expr *row, const rx_expr *cb, rx_buffer *ft) {
  return mm_epilogue_row8_n(s, mi, batch, row, cb, &ft, 1);
}

rx_stmt *mm_epilogue_row8_n(rx_sctx *s, const mm_info *mi, const rx_expr *const *batch,
                            const rx_expr *row, const rx_expr *cb, rx_buffer *const *fts, int n) {
  rx_expr_ctx *cx = s->cx;
  size_t mk = sym_analyzer_mark(s->an);
  const rx_expr *v = mm_bound_var(s, "v", 8), *col = sx_add(cx, cb, v);
  const rx_expr *vars[MAXN], *repl[MAXN];
  rx_rewrite rw;
  mm_point_rewrite(s, mi, batch, row, col, vars, repl, &rw);
  rx_stmtvec fin = {0};
  rx_tx *tot[1 + MM_MAX_EXTRA];
  RX_ASSERT(n == 1 + mi->nx && n <= 1 + MM_MAX_EXTRA);
  for (int t = 0; t < n; t++) tot[t] = sched_load(s, fts[t], &v, 1);
  mm_epilogue_n(s, mi, &rw, tot, &fin);
  rx_stmt *cols = sched_for(s, v, sx_const(cx, 8), RX_LOOP_VECTORIZE, sched_seq(s, &fin));
  sym_analyzer_reset(s->an, mk);
  /* M a multiple of 8 and cb one: the 8 columns are all inside M or all past it */
  cols = sched_guard(s, sched_bound_guard(s, cb, mi->M), cols);
  return sched_guard(s, sched_bound_guard(s, row, mi->N), cols);
}

/* The staged epilogue (matmul.h, mm_staged). The staged row: the tile's bn columns of f32 in
 * chunks of 4, chunk c at chunk c xor ((c / 8) % 2) (bit 0 flipped in every other run of 8), then
 * MM_STAGED_PAD floats: a row stride of 8 banks modulo 32. Written, the fragments' pairs (8-byte
 * stores: a phase of 16 lanes, 4 rows g of 4 pairs t) fall in 4 x 8 different banks; read, a
 * lane's 8 columns (two 16-byte loads: a phase of 8 lanes, one row) meet no other lane of its
 * phase in a bank (chunks 2u, then 2u + 1, of u = 0..7: 0, 2, .., 6 and 9, 11, .., 15 on the
 * first load). */
const rx_expr *mm_staged_col(rx_sctx *s, const rx_expr *cg, const rx_expr *t) {
  rx_expr_ctx *cx = s->cx;
  const rx_expr *two = sx_const(cx, 2);
  const rx_expr *b0 = sym_expr_floordiv(cx, t, two);                      /* bit 0 of the chunk */
  const rx_expr *b3 = sym_expr_floordiv(cx, cg, sx_const(cx, 4));         /* bit 3, and above */
  const rx_expr *chunk0 = sym_expr_floormod(cx, sx_add(cx, b0, b3), two); /* bit 0 swizzled */
  return sx_add(cx, sx_add(cx, sx_mul_c(cx, cg, 8), sx_mul_c(cx, chunk0, 4)),
                sx_mul_c(cx, sym_expr_floormod(cx, t, two), 2));
}

rx_stmt *mm_staged_pair(rx_sctx *s, rx_buffer *cs, const rx_expr *row, const rx_expr *cg,
                        const rx_expr *t, rx_buffer *acc, const rx_expr *const *ai, int nai) {
  rx_expr_ctx *cx = s->cx;
  size_t mk = sym_analyzer_mark(s->an);
  const rx_expr *e = mm_bound_var(s, "e", 2);
  const rx_expr *ci[2] = {row, sx_add(cx, mm_staged_col(s, cg, t), e)}, *a[4];
  RX_ASSERT(nai <= 4);
  for (int i = 0; i < nai; i++) a[i] = i == nai - 1 ? sx_add(cx, ai[i], e) : ai[i];
  rx_stmt *st = sched_store_e(s, cs, ci, 2, sched_load(s, acc, a, nai));
  sym_analyzer_reset(s->an, mk);
  return sched_for(s, e, sx_const(cx, 2), RX_LOOP_VECTORIZE, st);
}

int mm_staged_rows(int bm, int bn, int band, int64_t bytes) {
  int rows = (int)(bytes / ((int64_t)(bn + MM_STAGED_PAD) * 4)) / band * band;
  RX_ASSERT(rows >= band);
  return rows > bm ? bm : rows;
}

/* Lane u of a staged row (tx % (bn / 8)) reads its 8 columns 8 u .. 8 u + 7 from row r of cs
 * into ft (chunks 2 u and 2 u + 1, mm_staged_col's places), then mm_epilogue_row8. */
static void staged_row(rx_sctx *s, const mm_info *mi, const mm_staged *st, rx_buffer *cs,
                       rx_buffer *ft, const rx_expr *r, const rx_expr *row, rx_stmtvec *out) {
  rx_expr_ctx *cx = s->cx;
  const rx_expr *u = sym_expr_floormod(cx, st->tx, sx_const(cx, st->bn / 8));
  for (int hf = 0; hf < 2; hf++) {
    size_t mk = sym_analyzer_mark(s->an);
    const rx_expr *v = mm_bound_var(s, "v", 4);
    /* chunk 2 u + hf: bit 0 hf, bit 3 u / 4 */
    const rx_expr *c0 = sym_expr_floormod(
        cx, sx_add(cx, sx_const(cx, hf), sym_expr_floordiv(cx, u, sx_const(cx, 4))),
        sx_const(cx, 2));
    const rx_expr *ci[2] = {r, sx_add(cx, sx_add(cx, sx_mul_c(cx, u, 8), sx_mul_c(cx, c0, 4)), v)};
    const rx_expr *fi = sx_add(cx, v, sx_const(cx, 4 * hf));
    rx_stmt *ld = sched_store_e(s, ft, &fi, 1, sched_load(s, cs, ci, 2));
    sym_analyzer_reset(s->an, mk);
    RX_VEC_PUSH(out, sched_for(s, v, sx_const(cx, 4), RX_LOOP_VECTORIZE, ld));
  }
  const rx_expr *cb = sx_add(cx, st->col0, sx_mul_c(cx, u, 8));
  RX_VEC_PUSH(out, mm_epilogue_row8(s, mi, st->brepl, row, cb, ft));
}

/* The place of tile column c in a staged row (mm_staged_col's swizzle of 4-float chunks). */
static const rx_expr *staged_place(rx_sctx *s, const rx_expr *c) {
  rx_expr_ctx *cx = s->cx;
  const rx_expr *chunk = sx_div_c(cx, c, 4), *b0 = sx_mod_c(cx, chunk, 2);
  const rx_expr *sw = sx_mod_c(cx, sx_add(cx, b0, sx_div_c(cx, chunk, 8)), 2);
  return sx_add(cx, sx_mul_c(cx, sx_add(cx, sym_expr_sub(cx, chunk, b0), sw), 4),
                sx_mod_c(cx, c, 4));
}

/* M not a multiple of 8 (mm_staged.elems): no row start is 16-byte aligned, so the staged rows go
 * out an element a lane, a warp a row at a time: lane l of step w takes tile column 32 w + l (64
 * contiguous bytes of f16 a store, 2 or 3 sectors by the row's offset) and runs the epilogue at
 * that point (its loads the same walk), guarded only at the last column tile and past N, so the
 * lanes of a warp stay together. (Steps aligned to 64 bytes of the output would move 9 sectors a
 * 256-byte row instead of 12, at the cost of lanes idle in a different step each: a walk the
 * emulator's per-lane request model cannot count.) */
static void staged_elems(rx_sctx *s, const mm_info *mi, const mm_staged *st, rx_buffer *cs,
                         int pass, rx_stmtvec *out) {
  rx_expr_ctx *cx = s->cx;
  int warps = st->threads / 32, W = st->bn / 32;
  RX_ASSERT(st->rows % warps == 0);
  const rx_expr *lane = sx_mod_c(cx, st->tx, 32), *warp = sx_div_c(cx, st->tx, 32);
  size_t mk = sym_analyzer_mark(s->an);
  const rx_expr *rr = mm_bound_var(s, "rr", st->rows / warps), *w = mm_bound_var(s, "w", W);
  const rx_expr *r = sx_add(cx, sx_mul_c(cx, rr, warps), warp);
  const rx_expr *row = sx_add(cx, st->row0, sx_add(cx, sx_const(cx, pass * st->rows), r));
  const rx_expr *c = sx_add(cx, sx_mul_c(cx, w, 32), lane), *col = sx_add(cx, st->col0, c);
  const rx_expr *in =
      sx_and_opt(cx, sched_bound_guard(s, col, mi->M), sched_bound_guard(s, row, mi->N));
  const rx_expr *vars[MAXN], *repl[MAXN];
  rx_rewrite rw;
  mm_point_rewrite(s, mi, st->brepl, row, col, vars, repl, &rw);
  rx_stmtvec fin = {0};
  const rx_expr *ci[2] = {r, staged_place(s, c)};
  mm_epilogue(s, mi, &rw, sched_load(s, cs, ci, 2), &fin);
  rx_stmt *g = sched_guard(s, in, sched_seq(s, &fin));
  sym_analyzer_reset(s->an, mk);
  rx_stmt *ws = sched_for(s, w, sx_const(cx, W), RX_LOOP_SERIAL, g);
  RX_VEC_PUSH(out, sched_for(s, rr, sx_const(cx, st->rows / warps), RX_LOOP_SERIAL, ws));
}

void mm_epilogue_staged(rx_sctx *s, const mm_info *mi, const mm_staged *st, rx_stmtvec *body) {
  rx_expr_ctx *cx = s->cx;
  int lanes = st->bn / 8, per = st->threads / lanes; /* lanes a row, rows a sweep */
  RX_ASSERT(st->bm % st->rows == 0 && st->rows % per == 0 && st->threads % lanes == 0);
  int64_t eight[1] = {8}, shape[2] = {st->rows, st->bn + MM_STAGED_PAD};
  rx_stmt *al;
  rx_buffer *ft = sched_alloc(s, "ft", RX_DTYPE_F32, RX_SCOPE_LOCAL, eight, 1, &al);
  RX_VEC_PUSH(body, al);
  rx_buffer *cs = sched_alloc(s, "cs", RX_DTYPE_F32, RX_SCOPE_SHARED, shape, 2, &al);
  cs->reuse = true; /* over the pipeline's stages: every warp is past its last read (barrier) */
  RX_VEC_PUSH(body, al);
  const rx_expr *ry = sym_expr_floordiv(cx, st->tx, sx_const(cx, lanes));
  for (int pass = 0; pass < st->bm / st->rows; pass++) {
    RX_VEC_PUSH(body, sched_barrier(s)); /* the stages' (the last pass's) readers are done */
    st->write(st->ctx, cs, pass, body);
    RX_VEC_PUSH(body, sched_barrier(s));
    if (st->elems) {
      staged_elems(s, mi, st, cs, pass, body);
      continue;
    }
    size_t mk = sym_analyzer_mark(s->an);
    const rx_expr *sw = mm_bound_var(s, "sw", st->rows / per);
    const rx_expr *r = sx_add(cx, sx_mul_c(cx, sw, per), ry);
    const rx_expr *row = sx_add(cx, st->row0, sx_add(cx, sx_const(cx, pass * st->rows), r));
    rx_stmtvec rs = {0};
    staged_row(s, mi, st, cs, ft, r, row, &rs);
    sym_analyzer_reset(s->an, mk);
    RX_VEC_PUSH(body,
                sched_for(s, sw, sx_const(cx, st->rows / per), RX_LOOP_SERIAL, sched_seq(s, &rs)));
  }
}

/* Writes pass `pass` of gm_k's tile into cs (mm_staged's write): the warps whose 16 mt rows lie
 * in the pass (wm / bands == pass, bands = the warp rows a pass holds), each accumulator pair of
 * tile (m, n), row h, at cs[16 (mt (wm % bands) + m) + g + 8 h, mm_staged_col(nt wn + n, t)]. */
static void staged_write(void *ctx, rx_buffer *cs, int pass, rx_stmtvec *out) {
  gm_k *c = ctx;
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  int bands = (int)cs->shape[0]->value / (16 * c->mt);
  const rx_expr *g = sym_expr_floordiv(cx, c->lane, sx_const(cx, 4));
  const rx_expr *t = sym_expr_floormod(cx, c->lane, sx_const(cx, 4));
  size_t mk = sym_analyzer_mark(s->an);
  const rx_expr *m = mm_bound_var(s, "m", c->mt), *n = mm_bound_var(s, "n", c->nt);
  const rx_expr *h = mm_bound_var(s, "h", 2);
  const rx_expr *band = sym_expr_floormod(cx, c->wm, sx_const(cx, bands));
  const rx_expr *row = sx_add(cx, sx_add(cx, sx_mul_c(cx, band, 16 * c->mt), sx_mul_c(cx, m, 16)),
                              sx_add(cx, g, sx_mul_c(cx, h, 8)));
  const rx_expr *cg = sx_add(cx, sx_mul_c(cx, c->wn, c->nt), n);
  const rx_expr *ai[2] = {sx_add(cx, sx_mul_c(cx, m, c->nt), n), sx_mul_c(cx, h, 2)};
  rx_stmtvec hs = {0}, ns = {0}, ms = {0};
  RX_VEC_PUSH(&hs, mm_staged_pair(s, cs, row, cg, t, c->fc, ai, 2));
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(&ns, unrolled(s, h, 2, &hs));
  RX_VEC_PUSH(&ms, unrolled(s, n, c->nt, &ns));
  rx_stmt *w = unrolled(s, m, c->mt, &ms);
  int passes = c->cf.bm / (int)cs->shape[0]->value;
  const rx_expr *mine = sym_expr_cmp(
      cx, RX_EXPR_EQ, sym_expr_floordiv(cx, c->wm, sx_const(cx, bands)), sx_const(cx, pass));
  RX_VEC_PUSH(out, passes > 1 ? sched_guard(s, mine, w) : w);
}

/* The epilogue per 8 consecutive columns a lane (mm_quad_transpose, mm_epilogue_row8): row
 * row0 + 16 (mt wm + m) + g + 8 h, columns col0 + 8 (nt wn + t) + v (v in 0..8). */
static void epilogue_vec(gm_k *c, rx_stmtvec *body) {
  rx_sctx *s = c->s;
  rx_expr_ctx *cx = s->cx;
  const mm_info *mi = c->mi;
  if (mm_staged_pays(s, mi)) {
    int64_t stages = (int64_t)GM_STAGES * (c->cf.bm + c->cf.bn) * GM_BK * 2;
    mm_staged st = {
        c->cf.bm, c->cf.bn,     c->threads, mm_staged_rows(c->cf.bm, c->cf.bn, 16 * c->mt, stages),
        c->tx,    c->row0,      c->col0,    c->brepl,
        c,        staged_write, false};
    mm_epilogue_staged(s, mi, &st, body);
    return;
  }
  int64_t eight[1] = {8};
  rx_stmt *al;
  rx_buffer *ft = sched_alloc(s, "ft", RX_DTYPE_F32, RX_SCOPE_LOCAL, eight, 1, &al);
  RX_VEC_PUSH(body, al);
  const rx_expr *g = sym_expr_floordiv(cx, c->lane, sx_const(cx, 4));
  const rx_expr *t = sym_expr_floormod(cx, c->lane, sx_const(cx, 4));
  size_t mk = sym_analyzer_mark(s->an);
  const rx_expr *m = mm_bound_var(s, "m", c->mt), *h = mm_bound_var(s, "h", 2);
  rx_stmtvec hs = {0}, ms = {0};
  rx_tx *src[8];
  for (int j = 0; j < 8; j++) {
    const rx_expr *fi[2] = {sx_add(cx, sx_mul_c(cx, m, c->nt), sx_const(cx, j / 2)),
                            sx_add(cx, sx_mul_c(cx, h, 2), sx_const(cx, j % 2))};
    src[j] = sched_load(s, c->fc, fi, 2);
  }
  mm_quad_transpose(s, c->lane, src, ft, &hs);
  const rx_expr *row = sx_add(
      cx, sx_add(cx, c->row0, sx_add(cx, sx_mul_c(cx, c->wm, c->mt * 16), sx_mul_c(cx, m, 16))),
      sx_add(cx, g, sx_mul_c(cx, h, 8)));
  const rx_expr *cb =
      sx_add(cx, c->col0, sx_add(cx, sx_mul_c(cx, c->wn, c->nt * 8), sx_mul_c(cx, t, 8)));
  RX_VEC_PUSH(&hs, mm_epilogue_row8(s, mi, c->brepl, row, cb, ft));
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(&ms, unrolled(s, h, 2, &hs));
  RX_VEC_PUSH(body, unrolled(s, m, c->mt, &ms));
}

/* mm_epilogue_by_m (matmul.h). */
void mm_epilogue_by_m(rx_sctx *s, const rx_expr *M, bool only_frag, mm_epilogue_form vec,
                      mm_epilogue_form frag, void *k, rx_stmtvec *body) {
  rx_expr_ctx *cx = s->cx;
  int64_t d = sym_analyzer_divisor(s->an, M);
  if (only_frag || (M->kind == RX_EXPR_CONST && M->value % 8 != 0)) {
    frag(k, body);
    return;
  }
  if (d != 0 && d % 8 == 0) {
    vec(k, body);
    return;
  }
  const rx_expr *whole =
      sym_expr_cmp(cx, RX_EXPR_EQ, sym_expr_floormod(cx, M, sx_const(cx, 8)), sx_const(cx, 0));
  rx_stmtvec yes = {0}, no = {0};
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_assume(s->an, whole);
  vec(k, &yes);
  sym_analyzer_reset(s->an, mk);
  frag(k, &no);
  RX_VEC_PUSH(body, sched_if(s, sched_cond(s, whole), sched_seq(s, &yes), sched_seq(s, &no)));
}

bool mm_staged_pays(rx_sctx *s, const mm_info *mi) {
  int64_t d = mi->M->kind == RX_EXPR_CONST ? mi->M->value : sym_analyzer_divisor(s->an, mi->M);
  return d == 0 || d % 32 != 0;
}

static void epilogue_vec_form(void *k, rx_stmtvec *body) { epilogue_vec(k, body); }
static void epilogue_frag_form(void *k, rx_stmtvec *body) {
  gm_k *c = k;
  int64_t stages = (int64_t)GM_STAGES * (c->cf.bm + c->cf.bn) * GM_BK * 2;
  mm_staged st = {
      c->cf.bm, c->cf.bn,     c->threads, mm_staged_rows(c->cf.bm, c->cf.bn, 16 * c->mt, stages),
      c->tx,    c->row0,      c->col0,    c->brepl,
      c,        staged_write, true};
  if (c->nt == 4 && st.rows % (c->threads / 32) == 0) {
    mm_epilogue_staged(c->s, c->mi, &st, body);
    return;
  }
  epilogue_frag(k, body);
}

/* The epilogue: per 8 columns a lane where M is a multiple of 8 (known, or tested at run time:
 * the other in its else branch), else staged an element a lane (mm_staged.elems). Both tile
 * configurations give a quad's 4 lanes 4 tiles (nt), as mm_quad_transpose needs. */
static void epilogue(gm_k *c, rx_stmtvec *body) {
  mm_epilogue_by_m(c->s, c->mi->M, c->nt != 4, epilogue_vec_form, epilogue_frag_form, c, body);
}

/* The buffers: the stages (shared), the fragments and the zeroed accumulators (local). */
static void buffers(gm_k *c, rx_stmtvec *body) {
  rx_sctx *s = c->s;
  rx_dtype ab = c->p->dtype;
  rx_stmt *al;
  int64_t sa[3] = {GM_STAGES, c->cf.bm, GM_BK}, sb[3] = {GM_STAGES, c->cf.bn, GM_BK};
  if (c->kn) sb[1] = GM_BK, sb[2] = c->cf.bn;
  int64_t fa[2] = {c->mt, 8}, f8[1] = {8}, fb[2] = {c->nt, 4}, fc[2] = {c->mt * c->nt, 4};
  c->sa = sched_alloc(s, "sa", ab, RX_SCOPE_SHARED, sa, 3, &al);
  RX_VEC_PUSH(body, al);
  c->sb = sched_alloc(s, "sb", ab, RX_SCOPE_SHARED, sb, 3, &al);
  RX_VEC_PUSH(body, al);
  int64_t pkn[1] = {c->pk_bytes};
  for (int r = 0; c->pk.n && r < GM_DQ_SLOTS; r++)
    for (int i = 0; i < c->pk.n; i++) {
      c->pkb[r][i] = sched_alloc(s, "pk", c->pk.load[i]->buf->dtype, RX_SCOPE_LOCAL, pkn, 1, &al);
      RX_VEC_PUSH(body, al);
      if (c->dq_group == 1) continue;
      int64_t four[1] = {4};
      c->cwb[r][i] = sched_alloc(s, "cw", c->pk.load[i]->buf->dtype, RX_SCOPE_LOCAL, four, 1, &al);
      RX_VEC_PUSH(body, al);
    }
  c->fa = sched_alloc(s, "fa", ab, RX_SCOPE_LOCAL, fa, 2, &al);
  RX_VEC_PUSH(body, al);
  c->fbx = sched_alloc(s, "fbx", ab, RX_SCOPE_LOCAL, f8, 1, &al);
  RX_VEC_PUSH(body, al);
  c->fb = sched_alloc(s, "fb", ab, RX_SCOPE_LOCAL, fb, 2, &al);
  RX_VEC_PUSH(body, al);
  c->fc = sched_alloc(s, "fc", RX_DTYPE_F32, RX_SCOPE_LOCAL, fc, 2, &al);
  RX_VEC_PUSH(body, al);
  rx_tx *zero = NULL;
  sched_identity(s, RX_COMB_SUM, RX_DTYPE_F32, &zero);
  size_t mk = sym_analyzer_mark(s->an);
  const rx_expr *q = mm_bound_var(s, "q", c->mt * c->nt), *i = mm_bound_var(s, "i", 4);
  const rx_expr *di[2] = {q, i};
  rx_stmtvec zi = {0}, zq = {0};
  RX_VEC_PUSH(&zi, sched_store_e(s, c->fc, di, 2, zero));
  RX_VEC_PUSH(&zq, unrolled(s, i, 4, &zi));
  sym_analyzer_reset(s->an, mk);
  RX_VEC_PUSH(body, unrolled(s, q, c->mt * c->nt, &zq));
}

/* Where M is known, the 128 x 128 tiles are kept for row counts that give at least GM_WAVE
 * blocks (about one wave of a large GPU: 132 SMs on an H100, 108 on an A100); below that the
 * 64 x 64 tiles give 4x the blocks. M = 4096: up to 384 rows; 11008: 128; 1024: 1920. A
 * heuristic, to be checked against bench/gpu.sh's gemm part. */
#define GM_WAVE 128
int gemm_mma_mid_rows(const mm_info *mi) {
  if (mi->M->kind != RX_EXPR_CONST || mi->M->value < 1) return MID_ROWS;
  int64_t ncol = (mi->M->value + GM_LARGE.bn - 1) / GM_LARGE.bn;
  int64_t rows = (int64_t)GM_LARGE.bm * ((GM_WAVE + ncol - 1) / ncol - 1);
  return rows < MID_ROWS ? MID_ROWS : rows > 2048 ? 2048 : (int)rows;
}

rx_stmt *gemm_mma_schedule(rx_sctx *s, const mm_info *mi, bool small_tiles) {
  rx_expr_ctx *cx = s->cx;
  gm_cfg cf = small_tiles ? GM_SMALL : GM_LARGE;
  gm_k c = {.s = s,
            .mi = mi,
            .cf = cf,
            .mt = cf.bm / cf.wm / 16,
            .nt = cf.bn / cf.wn / 8,
            .threads = 32 * cf.wm * cf.wn,
            .kn = !mi->q_along_k && !mm_q_dequant(mi),
            .dq = mm_q_dequant(mi),
            .wq = mm_q_words(mi),
            .p = mm_plain_load(mi->p),
            .q = mm_plain_load(mi->q)};
  if (c.dq && (c.wq || !mm_packed_find(s, mi, &c.pk) || GM_BK % c.pk.lanes)) c.pk.n = 0;
  if (c.pk.n) { /* int4 (2 k a byte): one load serves 2 chunks where their count is even */
    int e = c.pk.per_byte[0];
    c.dq_group = (mi->K->value / GM_BK) % e == 0 ? e : 1;
    c.pk_bytes = 8 * c.dq_group / e;
  } else {
    c.dq_group = 1;
  }
  RX_ASSERT(!c.dq || cf.bn * 4 == c.threads * GM_DQ_SLOTS);
  const int BM = cf.bm, BN = cf.bn;
  const rx_expr *bx = sched_fresh_var(s, "bx"), *by = sched_fresh_var(s, "by");
  const rx_expr *bz = NULL, *nbatch = NULL;
  c.tx = sched_fresh_var(s, "tx");
  if (mi->nb > 0) {
    bz = sched_fresh_var(s, "bz");
    nbatch = sym_analyzer_simplify(s->an, sched_fuse(s, mi->nt.ext, mi->nb, bz, c.brepl));
  }
  const rx_expr *nrow = sched_ceildiv(s, mi->N, BM);
  const rx_expr *ncol = sched_ceildiv(s, mi->M, BN);
  size_t mk = sym_analyzer_mark(s->an);
  sym_analyzer_bind_range(s->an, bx, sx_const(s->cx, 0), ncol);
  sym_analyzer_bind_range(s->an, by, sx_const(s->cx, 0), nrow);
  sym_analyzer_bind_range(s->an, c.tx, sx_const(s->cx, 0), sx_const(s->cx, c.threads));
  if (bz) sym_analyzer_bind_range(s->an, bz, sx_const(s->cx, 0), nbatch);
  c.lane = sym_analyzer_simplify(s->an, sym_expr_floormod(cx, c.tx, sx_const(s->cx, 32)));
  const rx_expr *warp = sym_expr_floordiv(cx, c.tx, sx_const(s->cx, 32));
  c.wm = sym_analyzer_simplify(s->an, sym_expr_floordiv(cx, warp, sx_const(s->cx, cf.wn)));
  c.wn = sym_analyzer_simplify(s->an, sym_expr_floormod(cx, warp, sx_const(s->cx, cf.wn)));
  c.row0 = sx_mul_c(s->cx, by, BM);
  c.col0 = sx_mul_c(s->cx, bx, BN);
  rx_stmtvec body = {0};
  c.top = &body;
  buffers(&c, &body);
  pipeline(&c, &body);
  epilogue(&c, &body);
  sym_analyzer_reset(s->an, mk);
  rx_stmt *k =
      sched_for(s, c.tx, sx_const(s->cx, c.threads), RX_LOOP_THREAD_X, sched_seq(s, &body));
  k->count = small_tiles ? (c.wq ? TGT_OCC_GEMM_MMA_DQW_64 : TGT_OCC_GEMM_MMA_64) /* blocks */
             : c.dq      ? TGT_OCC_GEMM_MMA_DQ
                         : TGT_OCC_GEMM_MMA;
  if (bz) k = sched_for(s, bz, nbatch, RX_LOOP_BLOCK_Z, k);
  k = sched_for(s, by, nrow, RX_LOOP_BLOCK_Y, k);
  return sched_for(s, bx, ncol, RX_LOOP_BLOCK_X, k);
}
