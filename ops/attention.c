/* ops/attention.c: attention as tensor programs that never hold a score tensor, for dense
 * tensors (`attention`) and over the paged KV cache of docs/llm.md (`kv_append`,
 * `paged_attention`, `paged_decode_attention`, `attention_merge`): the shape deduction of the
 * paged ops and the legalization of all five.
 *
 * The attention programs are written already scheduled (loops bound to blocks and threads, as
 * passes/schedule.h describes), in one portable form that every target accepts as it is:
 * ATTN_THREADS threads and at most ATTN_SHARED bytes of shared memory per block, no subgroup
 * operation (reductions are shared-memory arrays and barriers), and barriers only under
 * conditions that are the same for every thread of the block. One block takes a tile of query
 * rows (a row: one query token and one query head; the heads of a GQA group share a block, so
 * they share every key and value loaded) and walks the keys in tiles of `tk` (a page of the
 * cache, or a part of one when the head dim is large):
 *
 *   load K tile -> barrier -> partial dot products (`ks` threads per score when the tile has
 *   fewer scores than threads) -> barrier -> one thread per row: the scores, the running max m
 *   and sum l of the row (online softmax), p = exp(s - m) and the rescale factor of the row;
 *   load V tile -> barrier -> acc = acc * rescale + p V (each thread a fixed set of the rows'
 *   output elements, in registers) -> barrier
 *
 * and writes acc / l at the end. Scores, m, l and acc are f32 whatever the dtype. */
#include "../shapes/expr_build.h"
#include "attention_int.h"
#include "deduce.h"
#include "legalize_int.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Threads per block: the generic Vulkan target's maxComputeWorkGroupInvocations (the minimum
 * the Vulkan spec guarantees, targets.c), so one program runs on every target. */
#define ATTN_THREADS 128
/* Shared memory per block: the generic Vulkan target's maxComputeSharedMemorySize (the spec's
 * minimum, targets.c). */
#define ATTN_SHARED 16384
/* Tokens per page of the KV cache: pages are [P, 2, kvh, ATTN_PAGE, d] (docs/llm.md,
 * RX_KV_PAGE of runtime/llm); also the largest key tile, so a tile never spans two pages. */
#define ATTN_PAGE 16
/* Query rows per block at most: with 16 keys per tile, 64 rows are 1024 scores per tile, eight
 * per thread, beyond which the row step (one thread per row) dominates the tile. */
#define ATTN_MAX_ROWS 64
/* Output elements one thread accumulates in registers: with 16, ptxas (CUDA 13) spills at the
 * register budget it picks for a 128-thread block (64 to 72 registers). */
#define ATTN_MAX_ACC 8
/* Keys per chunk of paged_decode_attention when `chunk` is not given: 16 pages, so a sequence
 * of 4096 tokens is split into 16 blocks per kv head. */
#define ATTN_DEFAULT_CHUNK 256
/* Decode on cp.async (async_decode): key tiles in shared memory at once, one being read while
 * the others are in flight (at least 3: the memory latency of a tile is then hidden behind the
 * arithmetic of three), within the 48 KiB of shared memory that a CUDA block has without
 * opting in (targets.c); tiles of fewer keys than ATTN_ASYNC_MIN_TILE would leave too little in
 * flight per block, and the portable kernel serves such head dims. */
#define ATTN_STAGES         4
#define ATTN_ASYNC_SHARED   49152
#define ATTN_ASYNC_MIN_TILE 8
/* Output elements per thread of that kernel: 16, so a GQA group of up to 16 heads of 128 dims is
 * one block; ptxas reports no spills for it (101 registers at sm_80, unit.test_attention). */
#define ATTN_ASYNC_MAX_ACC 16
/* async_decode's scores: lanes splitting one key's head dim in 16-byte pieces (lane_scores); 8
 * make one phase of 16-byte shared loads read 128 contiguous bytes of one key row (no bank
 * conflict whatever the row pitch), their partial dots summed by 3 shuffle_xor */
#define ATTN_KEY_LANES 8
/* The running max of a row starts at the lowest finite f32: a score equal to it (a mask of
 * torch.finfo(float32).min) still counts, and exp(m_old - m_new) is never inf - inf. */
#define ATTN_NO_SCORE (-FLT_MAX)
/* Scores are kept in base 2 (scaled by log2(e), the mask too, saturated: score()), so that p =
 * exp2(s - m): CUDA's accurate expf in the row step made ptxas spill registers, exp2f does not. */
#define ATTN_LOG2E 1.4426950408889634
#define ATTN_LN2   0.6931471805599453

#define ATTN_STR_(x) #x
#define ATTN_STR(x)  ATTN_STR_(x)

/* ------------------------------------------------------------------------------------------
 * shape deduction of the paged ops
 * ------------------------------------------------------------------------------------------ */

/* What an operand must be: its dims as a pattern over named dims ("N H D": a name binds on its
 * first appearance and must provably agree afterwards; a number is exact) and its dtype: 'T'
 * the floating-point dtype of the first 'T' operand, 'i' i32, 'f' f32. */
typedef struct operand_spec {
  const char *name;
  const char *dims;
  char dtype;
} operand_spec;

#define MAX_NAMED 8

/* The named dims bound so far, the common float dtype, and whether an operand had no shape. */
typedef struct unifier {
  char names[MAX_NAMED][8];
  const rx_expr *vals[MAX_NAMED];
  const char *from[MAX_NAMED]; /* the operand that bound it */
  int n;
  rx_dtype t;
  bool coarse;
} unifier;

static const rx_expr *named(const unifier *u, const char *name) {
  for (int i = 0; i < u->n; i++)
    if (!strcmp(u->names[i], name)) return u->vals[i];
  return NULL;
}

/* "[N, H, D]" of a pattern. */
static const char *pattern_text(rx_deduce_ctx *dc, const char *dims, int *rank) {
  char buf[128];
  size_t o = 0;
  *rank = 0;
  buf[o++] = '[';
  for (const char *p = dims; *p && o + 4 < sizeof buf; p++) {
    if (*p == ' ') {
      buf[o++] = ',';
      buf[o++] = ' ';
    } else {
      buf[o++] = *p;
    }
    if (*p != ' ' && (p[1] == ' ' || !p[1])) ++*rank;
  }
  buf[o++] = ']';
  buf[o] = 0;
  return base_arena_strdup(&dc->mod->arena, buf);
}

/* Checks dim k of operand `sp` (actual `dim`) against the pattern's token `tok`. */
static bool check_dim(rx_deduce_ctx *dc, const rx_node *call, const operand_spec *sp,
                      const char *pat, const rx_sinfo *s, int k, const char *tok, unifier *u) {
  const rx_expr *dim = s->shape[k], *want;
  const char *from = NULL;
  if (tok[0] >= '0' && tok[0] <= '9') {
    want = sym_expr_const(ops_ctx(dc), strtoll(tok, NULL, 10));
  } else if ((want = named(u, tok)) != NULL) {
    for (int i = 0; i < u->n; i++)
      if (!strcmp(u->names[i], tok)) from = u->from[i];
  } else {
    size_t len = strlen(tok);
    RX_ASSERT(u->n < MAX_NAMED && len < sizeof u->names[0]);
    memcpy(u->names[u->n], tok, len + 1); /* (snprintf: gcc -O1 cannot see the bound) */
    u->vals[u->n] = dim;
    u->from[u->n++] = sp->name;
    return true;
  }
  rx_tribool eq = ops_dim_eq(dc, dim, want);
  if (eq == RX_TRUE) return true;
  const char *w = from ? base_arena_printf(&dc->mod->arena, "%s = %s (from %s)", tok,
                                           ops_expr_str(dc, want), from)
                       : ops_expr_str(dc, want);
  ops_deduce_error(dc, "%s expects %s of shape %s, got %s: dim %d is %s, %s %s%s", call->op->name,
                   sp->name, pat, ops_str(dc, s), k, ops_expr_str(dc, dim),
                   eq == RX_FALSE ? "not" : "not provably", w,
                   eq == RX_FALSE ? "" : "; use match_cast to give it that shape");
  return false;
}

/* Checks operand i of the call against sp; binds its named dims. */
static bool check_operand(rx_deduce_ctx *dc, const rx_node *call, int i, const operand_spec *sp,
                          unifier *u) {
  const rx_sinfo *s = ops_tensor_arg(dc, call, i, sp->name);
  if (!s) return false;
  int rank;
  const char *pat = pattern_text(dc, sp->dims, &rank);
  rx_dtype want = sp->dtype == 'i' ? RX_DTYPE_I32 : sp->dtype == 'f' ? RX_DTYPE_F32 : u->t;
  if (sp->dtype == 'T' && u->t == RX_DTYPE_UNKNOWN) {
    if (s->dtype != RX_DTYPE_UNKNOWN && !ir_dtype_is_float(s->dtype)) {
      ops_deduce_error(dc, "%s expects %s as a floating-point tensor %s, got %s", call->op->name,
                       sp->name, pat, ops_str(dc, s));
      return false;
    }
    u->t = s->dtype;
  } else if (s->dtype != RX_DTYPE_UNKNOWN && want != RX_DTYPE_UNKNOWN && s->dtype != want) {
    ops_deduce_error(dc, "%s expects %s as %s%s, got %s", call->op->name, sp->name,
                     ir_dtype_name(want), pat, ops_str(dc, s));
    return false;
  }
  if (s->ndim >= 0 && s->ndim != rank) {
    ops_deduce_error(dc, "%s expects %s of rank %d (%s), got %s", call->op->name, sp->name, rank,
                     pat, ops_str(dc, s));
    return false;
  }
  if (s->ndim < 0 || !s->shape) {
    u->coarse = true;
    return true;
  }
  const char *p = sp->dims;
  for (int k = 0; k < rank; k++) {
    char tok[16];
    size_t n = strcspn(p, " ");
    RX_ASSERT(n < sizeof tok);
    memcpy(tok, p, n);
    tok[n] = 0;
    p += n + (p[n] == ' ');
    if (!check_dim(dc, call, sp, pat, s, k, tok, u)) return false;
  }
  return true;
}

static bool check_operands(rx_deduce_ctx *dc, const rx_node *call, const operand_spec *specs, int n,
                           unifier *u) {
  memset(u, 0, sizeof *u);
  u->t = RX_DTYPE_UNKNOWN;
  for (int i = 0; i < n; i++)
    if (!check_operand(dc, call, i, &specs[i], u)) return false;
  return true;
}

#define PAGES_DIMS "P 2 KVH " ATTN_STR(ATTN_PAGE) " D"

/* window >= 0; the query heads a multiple of the kv heads. */
static bool check_heads_window(rx_deduce_ctx *dc, const rx_node *call, const unifier *u) {
  int64_t window = ops_int_attr(call, "window", 0);
  const rx_attr *cap = ops_call_attr(call, "softcap");
  if (cap && !(cap->f > 0 && isfinite(cap->f))) {
    ops_deduce_error(dc, "%s expects softcap > 0 (the scores tanh(s / c) * c), got %g",
                     call->op->name, cap->f);
    return false;
  }
  if (window < 0) {
    ops_deduce_error(dc, "%s expects window >= 0 (0: every earlier key), got %lld", call->op->name,
                     (long long)window);
    return false;
  }
  if (u->coarse) return true;
  const rx_expr *h = named(u, "H"), *kvh = named(u, "KVH");
  rx_expr_ctx *cx = ops_ctx(dc);
  rx_tribool div = ops_prove(
      dc, sym_expr_cmp(cx, RX_EXPR_EQ, sym_expr_floormod(cx, h, kvh), sym_expr_const(cx, 0)));
  if (div == RX_TRUE) return true;
  ops_deduce_error(dc,
                   "%s expects the query heads of q (H = %s) to be %sa multiple of the kv heads "
                   "of pages (KVH = %s)",
                   call->op->name, ops_expr_str(dc, h), div == RX_FALSE ? "" : "provably ",
                   ops_expr_str(dc, kvh));
  return false;
}

const rx_sinfo *ops_deduce_kv_append(rx_deduce_ctx *dc, const rx_node *call) {
  static const operand_spec spec[] = {
      {"pages", PAGES_DIMS, 'T'}, {"k", "N KVH D", 'T'}, {"v", "N KVH D", 'T'}, {"slot", "N", 'i'}};
  unifier u;
  if (!check_operands(dc, call, spec, 4, &u)) return NULL;
  return call->args[0]->sinfo; /* the pages, written in place */
}

const rx_sinfo *ops_deduce_paged_attention(rx_deduce_ctx *dc, const rx_node *call) {
  static const operand_spec spec[] = {{"q", "N H D", 'T'},         {"pages", PAGES_DIMS, 'T'},
                                      {"page_table", "B MP", 'i'}, {"kv_len", "B", 'i'},
                                      {"q_seq", "N", 'i'},         {"q_pos", "N", 'i'}};
  unifier u;
  if (!check_operands(dc, call, spec, 6, &u) || !check_heads_window(dc, call, &u)) return NULL;
  if (u.coarse) return ops_tensor(dc, u.t, 3, NULL);
  const rx_expr **dims = ops_dims(dc, 3);
  dims[0] = named(&u, "N");
  dims[1] = named(&u, "H");
  dims[2] = named(&u, "D");
  return ops_tensor(dc, u.t, 3, dims);
}

const rx_sinfo *ops_deduce_paged_decode_attention(rx_deduce_ctx *dc, const rx_node *call) {
  static const operand_spec spec[] = {{"q", "B H D", 'T'},
                                      {"pages", PAGES_DIMS, 'T'},
                                      {"page_table", "B MP", 'i'},
                                      {"kv_len", "B", 'i'}};
  unifier u;
  if (!check_operands(dc, call, spec, 4, &u) || !check_heads_window(dc, call, &u)) return NULL;
  int64_t chunk = ops_int_attr(call, "chunk", ATTN_DEFAULT_CHUNK);
  if (chunk <= 0 || chunk % ATTN_PAGE != 0) {
    ops_deduce_error(dc, "paged_decode_attention expects chunk > 0 and a multiple of %d, got %lld",
                     ATTN_PAGE, (long long)chunk);
    return NULL;
  }
  const rx_sinfo *f[2];
  if (u.coarse) {
    f[0] = ops_tensor(dc, RX_DTYPE_F32, 4, NULL);
    f[1] = ops_tensor(dc, RX_DTYPE_F32, 3, NULL);
    return rx_sinfo_tuple(dc->mod, f, 2);
  }
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *keys = sym_expr_mul(cx, named(&u, "MP"), sym_expr_const(cx, ATTN_PAGE));
  const rx_expr *s =
      ops_simplify(dc, sym_expr_floordiv(cx, sym_expr_add(cx, keys, sym_expr_const(cx, chunk - 1)),
                                         sym_expr_const(cx, chunk)));
  const rx_expr **od = ops_dims(dc, 4), **ld = ops_dims(dc, 3);
  od[0] = ld[0] = named(&u, "B");
  od[1] = ld[1] = named(&u, "H");
  od[2] = ld[2] = s;
  od[3] = named(&u, "D");
  f[0] = ops_tensor(dc, RX_DTYPE_F32, 4, od);
  f[1] = ops_tensor(dc, RX_DTYPE_F32, 3, ld);
  return rx_sinfo_tuple(dc->mod, f, 2);
}

const rx_sinfo *ops_deduce_attention_merge(rx_deduce_ctx *dc, const rx_node *call) {
  static const operand_spec spec[] = {{"o", "B H S D", 'f'}, {"lse", "B H S", 'f'}};
  unifier u;
  if (!check_operands(dc, call, spec, 2, &u)) return NULL;
  const rx_attr *da = ops_call_attr(call, "dtype");
  rx_dtype t = da ? da->dtype : RX_DTYPE_F32;
  if (!ir_dtype_is_float(t)) {
    ops_deduce_error(dc, "attention_merge expects a floating-point dtype, got %s",
                     ir_dtype_name(t));
    return NULL;
  }
  if (u.coarse) return ops_tensor(dc, t, 3, NULL);
  const rx_expr **dims = ops_dims(dc, 3);
  dims[0] = named(&u, "B");
  dims[1] = named(&u, "H");
  dims[2] = named(&u, "D");
  return ops_tensor(dc, t, 3, dims);
}

int ops_legalize_inplace_arg(const rx_op *op) {
  return op->id == RX_OP_kv_append || op->id == RX_OP_kv_append_rope ? 0 : -1;
}

/* ------------------------------------------------------------------------------------------
 * the attention kernel
 * ------------------------------------------------------------------------------------------ */

typedef enum attn_kind {
  ATTN_DENSE,  /* attention: blocks (query tile, head, batch); one key range for all rows */
  ATTN_PAGED,  /* paged_attention: blocks (query tile, kv head x group chunk); each key tile
                  once per sequence of the query tile that holds it */
  ATTN_DECODE, /* paged_decode_attention: blocks (sequence, kv head x group chunk, chunk) */
} attn_kind;

typedef struct attn {
  lz_ctx *l;
  attn_kind kind;
  rx_dtype t;            /* dtype of q, k, v (pages) */
  int64_t dk, dv, dm;    /* head dim of q and k, of v and the output, the larger */
  int64_t group;         /* query heads per kv head (dense: 1) */
  int64_t rows;          /* query rows per block (a power of two) */
  int64_t gr, gc, tq;    /* heads of a group per block, blocks per group, tokens per block */
  int64_t tk, ks, pad;   /* keys per tile, threads per score, padding of a shared row */
  int64_t window, chunk; /* paged ops' attributes */
  bool causal;           /* attention's attribute */
  lz_opnd *q, *k, *v, *mask, *pages, *pt, *kvlen, *qseq, *qpos, *y, *lse;
  /* names in the program: block and thread variables, shared and local buffers */
  const char *bx, *by, *bz, *tx;
  const char *qs, *kv, *vs, *part, *ps, *alpha, *lsum, *acc, *mrow, *lrow;
  bool two; /* keys in kv and values in vs, loaded together; else both in turn in kv */
  const char *tseq, *tlo, *thi, *tlead, *slo, *shi; /* paged: per token of the tile */
  const char *rok, *rlo, *rhi; /* the row step's lets: the row takes part, its key range */
  /* the key tile being emitted */
  const rx_expr *jb;   /* its first key position */
  const rx_expr *off;  /* paged: the slot of that key in its page */
  const char *pid;     /* paged: the local holding the page id */
  const char *seq;     /* paged: the local holding the sequence of the pass */
  const char *lo, *hi; /* paged: locals of the block's key range (decode) */
  /* decode on cp.async (async_decode): kv and vs hold `stages` key tiles, the tile being read
   * starting at row srow (NULL: 0; the portable kernel has one stage) */
  int64_t stages;
  const rx_expr *srow;
  const char *pids; /* the chunk's page ids in shared memory (async_decode) */
  /* async_decode's scores (lane_scores): ATTN_KEY_LANES lanes a key, the tile's scores in part
   * as [key, row] (score reads part[j * rows + row]) */
  bool part_t;
} attn;

static int64_t cdiv(int64_t x, int64_t y) { return (x + y - 1) / y; }

/* A condition as text, or NULL when it is provably true (nothing to test). */
static const char *cond(attn *a, const rx_expr *e) {
  e = sym_expr_simplify(a->l->cx, e);
  return rx_expr_is_const(e, 1) ? NULL : lz_ex(a->l, e);
}

/* `c1 && c2` of conditions that may be NULL (true). */
static const char *both(attn *a, const char *c1, const char *c2) {
  if (!c1) return c2;
  if (!c2) return c1;
  return lz_str(a->l, "%s && %s", c1, c2);
}

/* Opens `if c {` unless c is NULL (true); returns whether it did. */
static bool open_if(attn *a, const char *c) {
  if (!c) return false;
  lz_line(a->l, "if %s {", c);
  a->l->ind++;
  return true;
}

/* How the block's threads cover a rows x cols tile (rows of q, a key tile, the rows of the
 * output): thread tx takes the columns tx % cw + cw * k (k < nk) of the rows tx / cw + rp * i
 * (i < ni), with cw the columns rounded up to a power of two (at most ATTN_THREADS) and
 * rp = ATTN_THREADS / cw rows at a time. Shifts and masks only: a division by a head dim such as
 * 96 in every index made ptxas spill. */
typedef struct cover {
  int64_t rows, cols, cw, rp, ni, nk;
  const char *i, *k; /* the loop variables, once opened (k NULL when nk == 1) */
} cover;

static cover cover_of(int64_t rows, int64_t cols) {
  cover c = {.rows = rows, .cols = cols};
  for (c.cw = 1; c.cw < cols && c.cw < ATTN_THREADS; c.cw *= 2) {
  }
  c.rp = ATTN_THREADS / c.cw;
  c.ni = cdiv(rows, c.rp);
  c.nk = cdiv(cols, c.cw);
  return c;
}

static const rx_expr *cover_row(attn *a, const cover *c) {
  const rx_expr *r = sx_mul_c(a->l->cx, sx_var(a->l->cx, c->i), c->rp);
  return c->cw == ATTN_THREADS
             ? r
             : sx_add(a->l->cx, sx_div_c(a->l->cx, sx_var(a->l->cx, a->tx), c->cw), r);
}

static const rx_expr *cover_col(attn *a, const cover *c) {
  const rx_expr *col = c->cw == ATTN_THREADS ? sx_var(a->l->cx, a->tx)
                                             : sx_mod_c(a->l->cx, sx_var(a->l->cx, a->tx), c->cw);
  return c->k ? sx_add(a->l->cx, col, sx_mul_c(a->l->cx, sx_var(a->l->cx, c->k), c->cw)) : col;
}

/* The register (acc index) of the current cell. */
static const char *cover_reg(attn *a, const cover *c) {
  return c->k ? lz_str(a->l, "%s * %lld + %s", c->i, (long long)c->nk, c->k) : c->i;
}

/* Guards of the cell: its row exists, its column exists (NULL when every one does). */
static const char *cover_row_guard(attn *a, const cover *c) {
  return c->rows % c->rp
             ? lz_ex(a->l, sx_lt(a->l->cx, cover_row(a, c), sx_const(a->l->cx, c->rows)))
             : NULL;
}
static const char *cover_col_guard(attn *a, const cover *c) {
  return c->cols % c->cw
             ? lz_ex(a->l, sx_lt(a->l->cx, cover_col(a, c), sx_const(a->l->cx, c->cols)))
             : NULL;
}

/* Opens the unrolled loops over this thread's rows (i) and columns (k) and the guard of the cell;
 * returns the levels to close. */
static int open_cover(attn *a, cover *c) {
  lz_ctx *l = a->l;
  c->i = lz_loopvar(l, "c");
  c->k = NULL;
  lz_line(l, "for %s in 0..%lld unroll {", c->i, (long long)c->ni);
  l->ind++;
  int levels = 1;
  if (c->nk > 1) {
    c->k = lz_loopvar(l, "k");
    lz_line(l, "for %s in 0..%lld unroll {", c->k, (long long)c->nk);
    l->ind++;
    levels++;
  }
  return levels + open_if(a, both(a, cover_row_guard(a, c), cover_col_guard(a, c)));
}

static void close_n(attn *a, int n) {
  for (int i = 0; i < n; i++) lz_close(a->l);
}

/* ---- rows ---- */

static const rx_expr *kv_head(attn *a) {
  return sx_div_c(a->l->cx, sx_var(a->l->cx, a->by), a->gc);
}
static const rx_expr *group_chunk(attn *a) {
  return sx_mod_c(a->l->cx, sx_var(a->l->cx, a->by), a->gc);
}

/* Row r's head exists (the last chunk of a group may be partial). */
static const rx_expr *head_valid(attn *a, const rx_expr *r) {
  if (a->group % a->gr == 0) return sx_const(a->l->cx, 1);
  return sx_lt(
      a->l->cx,
      sx_add(a->l->cx, sx_mul_c(a->l->cx, group_chunk(a), a->gr), sx_mod_c(a->l->cx, r, a->gr)),
      sx_const(a->l->cx, a->group));
}

/* The query head of row r (paged ops). */
static const rx_expr *row_head(attn *a, const rx_expr *r) {
  const rx_expr *g =
      sx_add(a->l->cx, sx_mul_c(a->l->cx, group_chunk(a), a->gr), sx_mod_c(a->l->cx, r, a->gr));
  return sx_add(a->l->cx, sx_mul_c(a->l->cx, kv_head(a), a->group), g);
}

/* The query token of row r: the dense query position, the paged token. */
static const rx_expr *row_token(attn *a, const rx_expr *r) {
  if (a->kind == ATTN_DENSE)
    return sx_add(a->l->cx, sx_mul_c(a->l->cx, sx_var(a->l->cx, a->bx), a->rows), r);
  if (a->kind == ATTN_PAGED)
    return sx_add(a->l->cx, sx_mul_c(a->l->cx, sx_var(a->l->cx, a->bx), a->tq),
                  sx_div_c(a->l->cx, r, a->gr));
  return sx_var(a->l->cx, a->bx);
}

/* Row r holds a query (symbolic condition). */
static const rx_expr *row_valid(attn *a, const rx_expr *r) {
  if (a->kind == ATTN_DENSE) return sx_lt(a->l->cx, row_token(a, r), a->q->shape[2]);
  const rx_expr *ok = a->tq * a->gr < a->rows
                          ? sx_lt(a->l->cx, r, sx_const(a->l->cx, a->tq * a->gr))
                          : sx_const(a->l->cx, 1);
  ok = sx_and(a->l->cx, ok, head_valid(a, r));
  if (a->kind == ATTN_PAGED)
    ok = sx_and(a->l->cx, ok, sx_lt(a->l->cx, row_token(a, r), a->q->shape[0]));
  return ok;
}

/* Element (row r, dim d) of q or of the output buffer o. */
static const char *row_elem(attn *a, const lz_opnd *o, const rx_expr *r, const rx_expr *d) {
  if (a->kind == ATTN_DENSE)
    return lz_str(a->l, "%s[%s, %s, %s, %s]", o->name, a->bz, a->by, lz_ex(a->l, row_token(a, r)),
                  lz_ex(a->l, d));
  if (a->kind == ATTN_PAGED)
    return lz_str(a->l, "%s[%s, %s, %s]", o->name, lz_ex(a->l, row_token(a, r)),
                  lz_ex(a->l, row_head(a, r)), lz_ex(a->l, d));
  if (o == a->q)
    return lz_str(a->l, "%s[%s, %s, %s]", o->name, a->bx, lz_ex(a->l, row_head(a, r)),
                  lz_ex(a->l, d));
  return lz_str(a->l, "%s[%s, %s, %s, %s]", o->name, a->bx, lz_ex(a->l, row_head(a, r)), a->bz,
                lz_ex(a->l, d));
}

/* ---- tiling ---- */

static int64_t shared_bytes(const attn *a, int64_t rows, int64_t tk) {
  int64_t es = ir_dtype_bits(a->t) / 8, pad = a->pad, st = a->stages ? a->stages : 1;
  int64_t scores = rows * tk, part = scores > ATTN_THREADS ? scores : ATTN_THREADS;
  int64_t meta = a->kind == ATTN_PAGED ? 6 * rows : a->stages ? a->chunk / ATTN_PAGE : 0;
  int64_t tiles = st * (a->two ? tk * (a->dk + pad) + tk * (a->dv + pad) : tk * (a->dm + pad));
  int64_t ps_pad = a->stages ? rows : 0; /* open_kernel: ps's rows padded by a word */
  return es * (rows * (a->dk + pad) + tiles) + 4 * (scores + ps_pad + part + 2 * rows + meta);
}

/* Picks the key tile and the rows per block: the largest that fit the shared memory and the
 * registers, keys first. With stages (async_decode, whose rows are 16-byte aligned for
 * async_copy: a->pad set), keys and values always apart in CUDA's shared memory, and false
 * without a message where nothing fits (the portable kernel then serves alone). */
static bool attn_tile(attn *a) {
  a->dm = a->dk > a->dv ? a->dk : a->dv;
  int64_t lim = a->stages ? ATTN_ASYNC_SHARED : ATTN_SHARED;
  /* one 32-bit word: rows of qs, kv in other banks */
  if (!a->pad) a->pad = 4 / (ir_dtype_bits(a->t) / 8);
  a->two = a->stages > 0;
  for (a->tk = ATTN_PAGE; a->tk > 1 && shared_bytes(a, 1, a->tk) > lim; a->tk /= 2) {
  }
  if (shared_bytes(a, 1, a->tk) > lim || (a->stages && a->tk < ATTN_ASYNC_MIN_TILE)) {
    if (!a->stages)
      lz_fail(a->l, "head dims %lld and %lld are too large for %d bytes of shared memory",
              (long long)a->dk, (long long)a->dv, ATTN_SHARED);
    return false;
  }
  /* Keys and values of a tile in two buffers where the tile still fits: both loads are in
   * flight together, one memory latency per tile instead of two (measured on an H100: decode
   * attention over 32768 keys took 1.7x the time of PyTorch's SDPA with them in turn). */
  a->two = true;
  if (shared_bytes(a, 1, a->tk) > lim) a->two = false;
  int64_t want = ATTN_MAX_ROWS;
  if (a->kind == ATTN_DECODE)
    for (want = 1; want < a->group && want < ATTN_MAX_ROWS; want *= 2) {
    }
  a->rows = 1;
  while (a->rows * 2 <= want && shared_bytes(a, a->rows * 2, a->tk) <= lim &&
         cover_of(a->rows * 2, a->dv).ni * cover_of(a->rows * 2, a->dv).nk <=
             (a->stages ? ATTN_ASYNC_MAX_ACC : ATTN_MAX_ACC))
    a->rows *= 2;
  a->ks = a->rows * a->tk >= ATTN_THREADS ? 1 : ATTN_THREADS / (a->rows * a->tk);
  a->gr = a->group < a->rows ? a->group : a->rows;
  a->gc = cdiv(a->group, a->gr);
  a->tq = a->kind == ATTN_DECODE ? 1 : a->rows / a->gr;
  return true;
}

/* ---- the pieces of the kernel ---- */

/* The kernel's block loops, its thread loop and its buffers. */
static void open_kernel(attn *a, const rx_expr *const *grid, int ngrid) {
  lz_ctx *l = a->l;
  static const char *const axis[] = {"x", "y", "z"};
  const char **bv[3] = {&a->bx, &a->by, &a->bz};
  for (int i = 0; i < ngrid; i++) {
    lz_line(l, "for %s in 0..%s bind(blockIdx.%s) {", *bv[i], lz_ex(a->l, grid[i]), axis[i]);
    l->ind++;
  }
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", a->tx, ATTN_THREADS);
  l->ind++;
  const char *t = ir_dtype_name(a->t);
  int64_t scores = a->rows * a->tk;
  lz_line(l, "alloc %s: %s[%lld, %lld] shared", a->qs, t, (long long)a->rows,
          (long long)(a->dk + a->pad));
  int64_t st = a->stages ? a->stages : 1;
  lz_line(l, "alloc %s: %s[%lld, %lld] shared", a->kv, t, (long long)(st * a->tk),
          (long long)((a->two ? a->dk : a->dm) + a->pad));
  if (a->two)
    lz_line(l, "alloc %s: %s[%lld, %lld] shared", a->vs, t, (long long)(st * a->tk),
            (long long)(a->dv + a->pad));
  lz_line(l, "alloc %s: f32[%lld] shared", a->part,
          (long long)(scores > ATTN_THREADS ? scores : ATTN_THREADS));
  /* the cp.async kernel's rows of ps one word apart in bank (its row step's threads, one a row,
   * write and read them at the same key: tk words apart, 16 or 32, were 2 to 4 in one bank) */
  lz_line(l, "alloc %s: f32[%lld, %lld] shared", a->ps, (long long)a->rows,
          (long long)(a->tk + (a->stages ? 1 : 0)));
  lz_line(l, "alloc %s: f32[%lld] shared", a->alpha, (long long)a->rows);
  lz_line(l, "alloc %s: f32[%lld] shared", a->lsum, (long long)a->rows);
  cover c = cover_of(a->rows, a->dv);
  lz_line(l, "alloc %s: f32[%lld] local", a->acc, (long long)(c.ni * c.nk));
  lz_line(l, "alloc %s: f32[1] local", a->mrow);
  lz_line(l, "alloc %s: f32[1] local", a->lrow);
  lz_line(l, "%s[0] = %s", a->mrow, lz_flit(l, ATTN_NO_SCORE));
}

/* Every thread stores a share of the block's rows of q into qs (zeros for missing rows). */
static void load_q(attn *a) {
  lz_ctx *l = a->l;
  cover c = cover_of(a->rows, a->dk);
  int levels = open_cover(a, &c);
  const rx_expr *r = cover_row(a, &c), *d = cover_col(a, &c);
  const char *ok = cond(a, row_valid(a, r));
  const char *val = row_elem(a, a->q, r, d);
  if (ok) val = lz_str(l, "select(%s, %s, %s)", ok, val, lz_down(l, a->t, "0.0"));
  lz_line(l, "%s[%s, %s] = %s", a->qs, lz_ex(a->l, r), lz_ex(a->l, d), val);
  close_n(a, levels);
}

/* Element (key jj of the tile, dim d) of k or v (which 0 / 1). */
static const char *key_elem(attn *a, int which, const rx_expr *jj, const rx_expr *d) {
  if (a->kind == ATTN_DENSE) {
    const lz_opnd *o = which ? a->v : a->k;
    const rx_expr *j = sx_add(a->l->cx, a->jb, jj);
    const char *in = cond(a, sx_lt(a->l->cx, j, a->k->shape[2]));
    const char *val =
        lz_str(a->l, "%s[%s, %s, %s, %s]", o->name, a->bz, a->by, lz_ex(a->l, j), lz_ex(a->l, d));
    return in ? lz_str(a->l, "select(%s, %s, %s)", in, val, lz_down(a->l, a->t, "0.0")) : val;
  }
  return lz_str(a->l, "%s[%s, %d, %s, %s, %s]", a->pages->name, a->pid, which,
                lz_ex(a->l, kv_head(a)), lz_ex(a->l, sx_add(a->l->cx, a->off, jj)), lz_ex(a->l, d));
}

/* Every thread stores a share of the tile's keys (which 0) or values (1) into kv. From pages,
 * each thread takes groups of 16 bytes of a key (8 f16, 4 f32) when the head dim is a multiple
 * of the group: a `vectorize` loop whose page index is base + v with base a multiple of the
 * lanes (the head dim is the innermost, constant extent), so the printers load 16 bytes at
 * once (passes/schedule.h); the shared stores stay scalar. */
static void load_keys(attn *a, int which) {
  lz_ctx *l = a->l;
  int64_t cols = which ? a->dv : a->dk;
  int64_t lanes = a->kind == ATTN_DENSE ? 1 : 16 / (ir_dtype_bits(a->t) / 8);
  if (lanes < 2 || cols % lanes) lanes = 1;
  cover c = cover_of(a->tk, cols / lanes);
  int levels = open_cover(a, &c);
  const rx_expr *jj = cover_row(a, &c), *d = cover_col(a, &c);
  if (lanes > 1) {
    const char *v = lz_loopvar(l, "v");
    lz_line(l, "for %s in 0..%lld vectorize {", v, (long long)lanes);
    l->ind++;
    levels++;
    d = sx_add(a->l->cx, sx_mul_c(a->l->cx, d, lanes), sx_var(a->l->cx, v));
  }
  lz_line(l, "%s[%s, %s] = %s", which && a->two ? a->vs : a->kv, lz_ex(a->l, jj), lz_ex(a->l, d),
          key_elem(a, which, jj, d));
  close_n(a, levels);
}

/* part[w] = the ks-th share of the dot product of a row of qs with a key of kv. The loop over w
 * stays serial (unrolled around the unrolled dot products, ptxas spilled registers). */
static void partial_scores(attn *a) {
  lz_ctx *l = a->l;
  const char *it = lz_loopvar(l, "c");
  lz_line(l, "for %s in 0..%lld {", it, (long long)cdiv(a->rows * a->tk * a->ks, ATTN_THREADS));
  l->ind++;
  const rx_expr *w = sx_add(a->l->cx, sx_var(a->l->cx, a->tx),
                            sx_mul_c(a->l->cx, sx_var(a->l->cx, it), ATTN_THREADS));
  const rx_expr *r = sx_div_c(a->l->cx, w, a->tk * a->ks),
                *j = sx_mod_c(a->l->cx, sx_div_c(a->l->cx, w, a->ks), a->tk);
  if (a->srow) j = sx_add(a->l->cx, j, a->srow);
  const char *dot = lz_fresh(l, "dot"), *i = lz_loopvar(l, "i");
  lz_line(l, "alloc %s: f32[1] local", dot);
  lz_line(l, "for %s in 0..%lld unroll {", i, (long long)cdiv(a->dk, a->ks));
  l->ind++;
  const rx_expr *d = sx_add(a->l->cx, sx_mul_c(a->l->cx, sx_var(a->l->cx, i), a->ks),
                            sx_mod_c(a->l->cx, w, a->ks));
  bool g =
      open_if(a, a->dk % a->ks ? lz_ex(a->l, sx_lt(a->l->cx, d, sx_const(a->l->cx, a->dk))) : NULL);
  lz_line(l, "%s[0] = %s[0] + %s * %s", dot, dot,
          lz_up(l, a->t, lz_str(l, "%s[%s, %s]", a->qs, lz_ex(a->l, r), lz_ex(a->l, d))),
          lz_up(l, a->t, lz_str(l, "%s[%s, %s]", a->kv, lz_ex(a->l, j), lz_ex(a->l, d))));
  if (g) lz_close(l);
  lz_close(l);
  lz_line(l, "%s[%s] = %s[0]", a->part, lz_ex(a->l, w), dot);
  lz_close(l);
}

/* async_decode's scores, where the head dim is whole 16-byte pieces, ATTN_KEY_LANES of them or
 * a multiple, and a warp's lanes are whole keys: lane w % ATTN_KEY_LANES of (row r, key j) reads
 * pieces i ATTN_KEY_LANES + w % ATTN_KEY_LANES of q's row and of the key with 16-byte loads (so a
 * phase of 8 lanes reads 128 contiguous bytes of one row of qs and one of kv: no bank conflict,
 * where one 2-byte element a lane put keys 8 rows apart in one bank), the lanes' dots summed by
 * shuffle_xor 1, 2, 4, and the first lane stores the row's score at part[j * rows + r] (the row
 * step's threads, one a row, then read consecutive words; as [row, key] they read words tk
 * apart, 4 in one bank). False, with nothing written, where the form does not fit. */
static bool lane_scores(attn *a) {
  lz_ctx *l = a->l;
  rx_expr_ctx *cx = l->cx;
  int64_t lanes = 16 / (ir_dtype_bits(a->t) / 8), pieces = a->dk / lanes;
  int64_t tasks = a->rows * a->tk * ATTN_KEY_LANES;
  if (a->dk % lanes || pieces % ATTN_KEY_LANES || tasks % 32 || a->dk != a->dv) return false;
  a->part_t = true;
  const char *it = lz_loopvar(l, "c");
  lz_line(l, "for %s in 0..%lld {", it, (long long)cdiv(tasks, ATTN_THREADS));
  l->ind++;
  const rx_expr *w = sx_add(cx, sx_var(cx, a->tx), sx_mul_c(cx, sx_var(cx, it), ATTN_THREADS));
  bool g = open_if(a, tasks % ATTN_THREADS ? lz_ex(l, sx_lt(cx, w, sx_const(cx, tasks))) : NULL);
  const rx_expr *kr = sx_div_c(cx, w, ATTN_KEY_LANES), *ln = sx_mod_c(cx, w, ATTN_KEY_LANES);
  const rx_expr *r = sx_div_c(cx, kr, a->tk), *j = sx_mod_c(cx, kr, a->tk);
  const rx_expr *jr = a->srow ? sx_add(cx, j, a->srow) : j;
  const char *dot = lz_fresh(l, "dot"), *i = lz_loopvar(l, "i"), *v = lz_loopvar(l, "v");
  lz_line(l, "alloc %s: f32[1] local", dot);
  lz_line(l, "%s[0] = 0.0", dot);
  lz_line(l, "for %s in 0..%lld unroll {", i, (long long)(pieces / ATTN_KEY_LANES));
  lz_line(l, "  for %s in 0..%lld vectorize {", v, (long long)lanes);
  const rx_expr *d =
      sx_add(cx, sx_mul_c(cx, sx_add(cx, sx_mul_c(cx, sx_var(cx, i), ATTN_KEY_LANES), ln), lanes),
             sx_var(cx, v));
  lz_line(l, "    %s[0] = %s[0] + %s * %s", dot, dot,
          lz_up(l, a->t, lz_str(l, "%s[%s, %s]", a->qs, lz_ex(l, r), lz_ex(l, d))),
          lz_up(l, a->t, lz_str(l, "%s[%s, %s]", a->kv, lz_ex(l, jr), lz_ex(l, d))));
  lz_line(l, "  }");
  lz_line(l, "}");
  const char *prev = lz_str(l, "%s[0]", dot);
  for (int m = 1; m < ATTN_KEY_LANES; m *= 2) {
    const char *sum = lz_fresh(l, "dot");
    lz_line(l, "let %s: f32 = %s + shuffle_xor(%s, %d)", sum, prev, prev, m);
    prev = sum;
  }
  lz_line(l, "if %s == 0 {", lz_ex(l, ln));
  lz_line(l, "  %s[%s] = %s", a->part, lz_ex(l, sx_add(cx, sx_mul_c(cx, j, a->rows), r)), prev);
  lz_line(l, "}");
  if (g) lz_close(l);
  lz_close(l);
  return true;
}

/* Is key j of the tile visible to the row of this thread? (text; NULL: always) */
static const char *key_visible(attn *a, const rx_expr *j) {
  const rx_expr *pos = sx_add(a->l->cx, a->jb, j);
  if (a->kind == ATTN_DENSE) {
    const rx_expr *row = row_token(a, sx_var(a->l->cx, a->tx)), *s = a->q->shape[2],
                  *t = a->k->shape[2];
    const rx_expr *ok = sx_and(a->l->cx, sx_lt(a->l->cx, pos, t), sx_lt(a->l->cx, row, s));
    if (a->causal)
      ok = sx_and(a->l->cx, ok,
                  sym_expr_cmp(a->l->cx, RX_EXPR_LE, pos,
                               sx_add(a->l->cx, row, sym_expr_sub(a->l->cx, t, s))));
    return cond(a, ok);
  }
  const char *p = lz_ex(a->l, pos);
  return lz_str(a->l, "%s && i32(%s) >= %s && i32(%s) <= %s", a->rok, p, a->rlo, p, a->rhi);
}

/* The lets of the row step: rok (the row takes part in this tile's sequence), rlo, rhi (the
 * positions of its first and last visible key). */
static void row_lets(attn *a) {
  lz_ctx *l = a->l;
  if (a->kind == ATTN_PAGED) {
    const char *tq = lz_ex(a->l, sx_div_c(a->l->cx, sx_var(a->l->cx, a->tx), a->gr));
    const char *g = cond(a, head_valid(a, sx_var(a->l->cx, a->tx)));
    lz_line(l, "let %s: i32 = %s[%s]", a->rlo, a->tlo, tq);
    lz_line(l, "let %s: i32 = %s[%s]", a->rhi, a->thi, tq);
    lz_line(l, "let %s: bool = %s", a->rok,
            both(a, lz_str(l, "%s[%s] == %s", a->tseq, tq, a->seq), g));
  } else if (a->kind == ATTN_DECODE) {
    const char *ok = cond(a, row_valid(a, sx_var(a->l->cx, a->tx)));
    lz_line(l, "let %s: i32 = %s", a->rlo, a->lo);
    lz_line(l, "let %s: i32 = %s", a->rhi, a->hi);
    lz_line(l, "let %s: bool = %s", a->rok, ok ? ok : "true");
  }
}

const char *ops_attn_score(lz_ctx *l, double dflt, const char *dot) {
  const rx_attr *sa = ops_call_attr(l->call, "scale"), *ca = ops_call_attr(l->call, "softcap");
  double scale = sa ? sa->f : dflt, cap = ca ? ca->f : 0;
  if (!(cap > 0)) return lz_str(l, "%s * %s", dot, lz_flit(l, scale * ATTN_LOG2E));
  return lz_str(l, "tanh(%s * %s) * %s", dot, lz_flit(l, scale / cap),
                lz_flit(l, cap * ATTN_LOG2E));
}

/* The base-2 score of this form's dot product text dot (ops_attn_score). */
static const char *scored(attn *a, const char *dot) {
  return ops_attn_score(a->l, 1.0 / sqrt((double)a->dk), dot);
}

/* The score of key j for the row of this thread (f32 text). */
static const char *score(attn *a, const char *j) {
  lz_ctx *l = a->l;
  rx_strbuf b = {0};
  if (a->part_t) /* lane_scores: [key, row], the row threads read consecutive words */
    base_strbuf_printf(&b, "%s[%s * %lld + %s]", a->part, j, (long long)a->rows, a->tx);
  for (int64_t k = 0; !a->part_t && k < a->ks; k++) {
    const rx_expr *w =
        sx_add(a->l->cx,
               sx_mul_c(a->l->cx,
                        sx_add(a->l->cx, sx_mul_c(a->l->cx, sx_var(a->l->cx, a->tx), a->tk),
                               sx_var(a->l->cx, j)),
                        a->ks),
               sx_const(a->l->cx, k));
    base_strbuf_printf(&b, "%s%s[%s]", k ? " + " : "", a->part, lz_ex(a->l, w));
  }
  const char *sum = scored(a, lz_str(l, "(%s)", b.data));
  base_strbuf_free(&b);
  if (!a->mask) return sum;
  /* the mask, broadcast from the right to [b, h, s, t]; a dim 1 reads index 0 */
  const rx_expr *row = row_token(a, sx_var(a->l->cx, a->tx)),
                *pos = sx_add(a->l->cx, a->jb, sx_var(a->l->cx, j));
  const char *full[4] = {a->bz, a->by, lz_ex(a->l, row), lz_ex(a->l, pos)}, *idx[4];
  const lz_opnd *m = a->mask;
  for (int k = 0; k < m->ndim; k++)
    idx[k] = rx_expr_is_const(m->shape[k], 1) ? "0" : full[4 - m->ndim + k];
  const char *in = cond(a, sx_and(a->l->cx, sx_lt(a->l->cx, row, a->q->shape[2]),
                                  sx_lt(a->l->cx, pos, a->k->shape[2])));
  /* in base 2 a mask of finfo.min (Hugging Face's padding) overflows to -inf, and a row masked
   * with it everywhere would be NaN where PyTorch and ONNX Runtime give its uniform average: a
   * finite mask saturates at -FLT_MAX, so that such a row's scores all round to -FLT_MAX; -inf
   * stays -inf (a row of -inf only is NaN, as theirs is) */
  const char *mr = lz_up(l, a->t, lz_load(l, m, idx)), *lo = lz_flit(l, ATTN_NO_SCORE);
  const char *mv = lz_str(l, "select(%s >= %s, max(%s * %s, %s), %s)", mr, lo, mr,
                          lz_flit(l, ATTN_LOG2E), lo, mr);
  if (in) mv = lz_str(l, "select(%s, %s, 0.0)", in, mv);
  return lz_str(l, "%s + %s", sum, mv);
}

/* One thread per row: the tile's scores, the new running max and sum, p = exp2(s - m) into ps
 * and the rescale factor of the row's accumulator into alpha. */
static void row_step(attn *a) {
  lz_ctx *l = a->l;
  lz_line(l, "if %s < %lld {", a->tx, (long long)a->rows);
  l->ind++;
  row_lets(a);
  const char *tm = lz_fresh(l, "tm"), *ls = lz_fresh(l, "ls"), *al = lz_fresh(l, "al");
  const char *j = lz_loopvar(l, "j"), *sc = lz_fresh(l, "sc");
  lz_line(l, "alloc %s: f32[1] local", tm);
  lz_line(l, "%s[0] = %s[0]", tm, a->mrow);
  lz_line(l, "for %s in 0..%lld {", j, (long long)a->tk);
  l->ind++;
  lz_line(l, "let %s: f32 = %s", sc, score(a, j));
  lz_line(l, "%s[%s, %s] = %s", a->ps, a->tx, j, sc);
  const char *vis = key_visible(a, sx_var(a->l->cx, j));
  bool g = open_if(a, vis);
  lz_line(l, "%s[0] = max(%s[0], %s)", tm, tm, sc);
  if (g) lz_close(l);
  lz_close(l);
  lz_line(l, "let %s: f32 = exp2(%s[0] - %s[0])", al, a->mrow, tm);
  lz_line(l, "alloc %s: f32[1] local", ls);
  const char *j2 = lz_loopvar(l, "j"), *p = lz_fresh(l, "p");
  lz_line(l, "for %s in 0..%lld {", j2, (long long)a->tk);
  l->ind++;
  const char *e = lz_str(l, "exp2(%s[%s, %s] - %s[0])", a->ps, a->tx, j2, tm);
  vis = key_visible(a, sx_var(a->l->cx, j2));
  lz_line(l, "let %s: f32 = %s", p, vis ? lz_str(l, "select(%s, %s, 0.0)", vis, e) : e);
  lz_line(l, "%s[%s, %s] = %s", a->ps, a->tx, j2, p);
  lz_line(l, "%s[0] = %s[0] + %s", ls, ls, p);
  lz_close(l);
  lz_line(l, "%s[0] = %s[0] * %s + %s[0]", a->lrow, a->lrow, al, ls);
  lz_line(l, "%s[0] = %s[0]", a->mrow, tm);
  lz_line(l, "%s[%s] = %s", a->alpha, a->tx, al);
  lz_close(l);
}

/* acc = acc * alpha + p V for the output cells of this thread: per key, one shared load of V per
 * column for all of its rows. */
static void accumulate(attn *a) {
  lz_ctx *l = a->l;
  cover c = cover_of(a->rows, a->dv);
  int levels = open_cover(a, &c);
  const char *reg = cover_reg(a, &c);
  lz_line(l, "%s[%s] = %s[%s] * %s[%s]", a->acc, reg, a->acc, reg, a->alpha,
          lz_ex(a->l, cover_row(a, &c)));
  close_n(a, levels);
  const char *j = lz_loopvar(l, "j"), *vv = lz_fresh(l, "vv");
  lz_line(l, "for %s in 0..%lld {", j, (long long)a->tk);
  l->ind++;
  c.i = NULL;
  c.k = NULL;
  levels = 0;
  if (c.nk > 1) {
    c.k = lz_loopvar(l, "k");
    lz_line(l, "for %s in 0..%lld unroll {", c.k, (long long)c.nk);
    l->ind++;
    levels++;
  }
  c.i = lz_loopvar(l, "c"); /* cover_col does not use it */
  levels += open_if(a, cover_col_guard(a, &c));
  const char *jr = a->srow ? lz_ex(l, sx_add(l->cx, sx_var(l->cx, j), a->srow)) : j;
  lz_line(
      l, "let %s: f32 = %s", vv,
      lz_up(l, a->t,
            lz_str(l, "%s[%s, %s]", a->two ? a->vs : a->kv, jr, lz_ex(a->l, cover_col(a, &c)))));
  lz_line(l, "for %s in 0..%lld unroll {", c.i, (long long)c.ni);
  l->ind++;
  levels++;
  levels += open_if(a, cover_row_guard(a, &c));
  reg = cover_reg(a, &c);
  lz_line(l, "%s[%s] = %s[%s] + %s[%s, %s] * %s", a->acc, reg, a->acc, reg, a->ps,
          lz_ex(a->l, cover_row(a, &c)), j, vv);
  close_n(a, levels + 1);
}

/* One key tile (a->jb, and a->pid, a->off for pages) for every row of the block. */
static void key_tile(attn *a) {
  lz_ctx *l = a->l;
  load_keys(a, 0);
  if (a->two) load_keys(a, 1);
  lz_line(l, "barrier");
  partial_scores(a);
  lz_line(l, "barrier");
  row_step(a);
  if (!a->two) load_keys(a, 1);
  lz_line(l, "barrier");
  accumulate(a);
  lz_line(l, "barrier");
}

/* The rows' outputs acc / l (0 for a row that saw no key, NaN for dense attention as docs/ops.md
 * says), and for decode the log-sum-exp of each row. */
static void finish(attn *a) {
  lz_ctx *l = a->l;
  lz_line(l, "if %s < %lld {", a->tx, (long long)a->rows);
  l->ind++;
  lz_line(l, "%s[%s] = %s[0]", a->lsum, a->tx, a->lrow);
  if (a->lse) {
    bool g = open_if(a, cond(a, row_valid(a, sx_var(a->l->cx, a->tx))));
    lz_line(l, "%s[%s, %s, %s] = select(%s[0] > 0.0, (%s[0] + log2(%s[0])) * %s, (-inf))",
            a->lse->name, a->bx, lz_ex(a->l, row_head(a, sx_var(a->l->cx, a->tx))), a->bz, a->lrow,
            a->mrow, a->lrow, lz_flit(l, ATTN_LN2));
    if (g) lz_close(l);
  }
  lz_close(l);
  lz_line(l, "barrier");
  cover c = cover_of(a->rows, a->dv);
  int levels = open_cover(a, &c);
  const rx_expr *r = cover_row(a, &c), *d = cover_col(a, &c);
  levels += open_if(a, cond(a, row_valid(a, r)));
  const char *lr = lz_str(l, "%s[%s]", a->lsum, lz_ex(a->l, r));
  const char *v = lz_str(l, "%s[%s] / %s", a->acc, cover_reg(a, &c), lr);
  if (a->kind != ATTN_DENSE) v = lz_str(l, "select(%s > 0.0, %s, 0.0)", lr, v);
  lz_line(l, "%s = %s", row_elem(a, a->y, r, d), lz_down(l, a->y->dtype, v));
  close_n(a, levels);
}

/* ---- setting up ---- */

static bool const_dim(attn *a, const lz_opnd *o, int k, const char *what, int64_t *out) {
  const rx_expr *d = o->shape[k];
  if (d->kind == RX_EXPR_CONST && d->value > 0) {
    *out = d->value;
    return true;
  }
  lz_fail(a->l, "%s (dim %d of %s) must be a positive constant, got %s; use match_cast", what, k,
          o->name, lz_ex(a->l, d));
  return false;
}

static bool attn_start(attn *a, lz_ctx *l, attn_kind kind) {
  memset(a, 0, sizeof *a);
  a->l = l;
  a->kind = kind;
  for (int i = 0; i < l->call->nargs; i++) {
    if (lz_arg(l, i)->scalar) {
      lz_fail(l, "expects tensor operands");
      return false;
    }
  }
  a->q = lz_arg(l, 0);
  a->t = a->q->dtype;
  if (!ir_dtype_is_float(a->t)) {
    lz_fail(l, "expects floating-point operands");
    return false;
  }
  a->y = &l->outs[0];
  a->window = ops_int_attr(l->call, "window", 0);
  a->chunk = ops_int_attr(l->call, "chunk", ATTN_DEFAULT_CHUNK);
  a->bx = lz_loopvar(l, kind == ATTN_DECODE ? "sq" : "tile");
  a->by = lz_loopvar(l, kind == ATTN_DENSE ? "hd" : "kh");
  a->bz = lz_loopvar(l, kind == ATTN_DENSE ? "bt" : "ch");
  a->tx = lz_loopvar(l, "tx");
  a->qs = lz_fresh(l, "qs");
  a->kv = lz_fresh(l, "kv");
  a->vs = lz_fresh(l, "vs");
  a->part = lz_fresh(l, "part");
  a->ps = lz_fresh(l, "ps");
  a->alpha = lz_fresh(l, "alpha");
  a->lsum = lz_fresh(l, "lsum");
  a->acc = lz_fresh(l, "acc");
  a->mrow = lz_fresh(l, "mrow");
  a->lrow = lz_fresh(l, "lrow");
  a->rok = lz_fresh(l, "rok");
  a->rlo = lz_fresh(l, "rlo");
  a->rhi = lz_fresh(l, "rhi");
  return true;
}

/* ------------------------------------------------------------------------------------------
 * the generators
 * ------------------------------------------------------------------------------------------ */

void lz_gen_attention(lz_ctx *l) {
  attn a;
  if (!attn_start(&a, l, ATTN_DENSE)) return;
  a.k = lz_arg(l, 1);
  a.v = lz_arg(l, 2);
  a.mask = l->call->nargs > 3 ? lz_arg(l, 3) : NULL;
  a.causal = ops_int_attr(l->call, "causal", 0) != 0;
  a.group = 1;
  if (!const_dim(&a, a.q, 3, "the head dim d", &a.dk) ||
      !const_dim(&a, a.v, 3, "the value dim dv", &a.dv) || !attn_tile(&a))
    return;
  const rx_expr *s = a.q->shape[2], *t = a.k->shape[2];
  const rx_expr *grid[3] = {
      sx_div_c(a.l->cx, sx_add(a.l->cx, s, sx_const(a.l->cx, a.rows - 1)), a.rows), a.q->shape[1],
      a.q->shape[0]};
  open_kernel(&a, grid, 3);
  load_q(&a);
  const char *kt = lz_loopvar(l, "kt");
  lz_line(l, "for %s in 0..%s {", kt,
          lz_ex(a.l, sx_div_c(a.l->cx, sx_add(a.l->cx, t, sx_const(a.l->cx, a.tk - 1)), a.tk)));
  l->ind++;
  a.jb = sx_mul_c(a.l->cx, sx_var(a.l->cx, kt), a.tk);
  /* causal: skip the tiles after the last key the block's last row sees */
  const rx_expr *last =
      sx_add(a.l->cx, row_token(&a, sx_const(a.l->cx, a.rows - 1)), sym_expr_sub(l->cx, t, s));
  bool g = a.causal && open_if(&a, cond(&a, sym_expr_cmp(l->cx, RX_EXPR_LE, a.jb, last)));
  key_tile(&a);
  if (g) lz_close(l);
  lz_close(l);
  finish(&a);
  for (int i = 0; i < 4; i++) lz_close(l);
}

/* paged_attention and paged_decode_attention: operands, constant dims, attributes. */
static bool paged_start(attn *a, lz_ctx *l, attn_kind kind) {
  if (!attn_start(a, l, kind)) return false;
  a->pages = lz_arg(l, 1);
  a->pt = lz_arg(l, 2);
  a->kvlen = lz_arg(l, 3);
  int64_t heads, kvh;
  if (!const_dim(a, a->q, 1, "the query heads H", &heads) ||
      !const_dim(a, a->q, 2, "the head dim D", &a->dk) ||
      !const_dim(a, a->pages, 2, "the kv heads KVH", &kvh))
    return false;
  a->dv = a->dk;
  a->group = heads / kvh;
  if (!attn_tile(a)) return false;
  return true;
}

/* The tokens of this block's tile: min(tq, N - tile * tq), symbolic (NVVM then does not unroll
 * the loops over them, which made ptxas spill). Written as a select: the C printers give
 * min(long long, int) for a min of a 64-bit index and a literal, which CUDA finds ambiguous. */
static const char *tile_tokens(attn *a) {
  const rx_expr *left =
      sym_expr_sub(a->l->cx, a->q->shape[0], sx_mul_c(a->l->cx, sx_var(a->l->cx, a->bx), a->tq));
  return lz_ex(a->l, sym_expr_select(a->l->cx, sx_lt(a->l->cx, left, sx_const(a->l->cx, a->tq)),
                                     left, sx_const(a->l->cx, a->tq)));
}

void ops_attn_token_table(lz_ctx *l, const ops_token_table *t) {
  rx_expr_ctx *cx = l->cx;
  const char *sq = lz_fresh(l, "sq"), *qp = lz_fresh(l, "qp"), *kl = lz_fresh(l, "kl");
  lz_line(l, "if %s < %lld {", t->tx, (long long)t->rows);
  l->ind++;
  const rx_expr *n = sx_add(cx, sx_mul_c(cx, sx_var(cx, t->tile), t->tq), sx_var(cx, t->tx));
  const char *ok = lz_ex(l, sx_and(cx, sx_lt(cx, sx_var(cx, t->tx), sx_const(cx, t->tq)),
                                   sx_lt(cx, n, t->q->shape[0])));
  lz_line(l, "let %s: i32 = select(%s, %s[%s], (-1))", sq, ok, t->qseq->name, lz_ex(l, n));
  lz_line(l, "let %s: i32 = select(%s, %s[%s], 0)", qp, ok, t->qpos->name, lz_ex(l, n));
  lz_line(l, "let %s: i32 = select(%s, %s[%s], 0)", kl, ok, t->kvlen->name, sq);
  lz_line(l, "%s[%s] = %s", t->tseq, t->tx, sq);
  lz_line(l, "%s[%s] = min(%s, %s - 1)", t->thi, t->tx, qp, kl);
  if (t->window > 0)
    lz_line(l, "%s[%s] = max(0, %s - %lld)", t->tlo, t->tx, qp, (long long)(t->window - 1));
  else
    lz_line(l, "%s[%s] = 0", t->tlo, t->tx);
  lz_close(l);
  lz_line(l, "barrier");
  const char *first = lz_fresh(l, "first"), *lo = lz_fresh(l, "lo"), *hi = lz_fresh(l, "hi");
  const char *u = lz_loopvar(l, "u");
  lz_line(l, "if %s < %lld {", t->tx, (long long)t->rows);
  l->ind++;
  lz_line(l, "alloc %s: i32[1] local", first);
  lz_line(l, "alloc %s: i32[1] local", lo);
  lz_line(l, "alloc %s: i32[1] local", hi);
  lz_line(l, "%s[0] = select(%s[%s] >= 0, i32(1), i32(0))", first, t->tseq, t->tx);
  lz_line(l, "%s[0] = 2147483647", lo);
  lz_line(l, "%s[0] = (-1)", hi);
  lz_line(l, "for %s in 0..%s {", u, t->ntok);
  l->ind++;
  lz_line(l, "if %s[%s] == %s[%s] {", t->tseq, u, t->tseq, t->tx);
  l->ind++;
  lz_line(l, "if %s < %s {", u, t->tx);
  lz_line(l, "  %s[0] = 0", first);
  lz_line(l, "}");
  lz_line(l, "%s[0] = min(%s[0], %s[%s])", lo, lo, t->tlo, u);
  lz_line(l, "%s[0] = max(%s[0], %s[%s])", hi, hi, t->thi, u);
  lz_close(l);
  lz_close(l);
  lz_line(l, "%s[%s] = %s[0]", t->tlead, t->tx, first);
  lz_line(l, "%s[%s] = %s[0]", t->slo, t->tx, lo);
  lz_line(l, "%s[%s] = %s[0]", t->shi, t->tx, hi);
  lz_close(l);
  lz_line(l, "barrier");
}

/* The token table (ops_attn_token_table) of the block's tile, its six shared arrays allocated
 * here. */
static void token_table(attn *a) {
  const char *b[6] = {a->tseq, a->tlo, a->thi, a->tlead, a->slo, a->shi};
  for (int i = 0; i < 6; i++) lz_line(a->l, "alloc %s: i32[%lld] shared", b[i], (long long)a->rows);
  ops_token_table t = {a->tseq, a->tlo,  a->thi,   a->tlead, a->slo,         a->shi,
                       a->tx,   a->bx,   a->rows,  a->tq,    tile_tokens(a), a->q,
                       a->qseq, a->qpos, a->kvlen, a->window};
  ops_attn_token_table(a->l, &t);
}

/* The portable paged_attention kernel. */
static void paged_portable(lz_ctx *l) {
  attn a;
  if (!paged_start(&a, l, ATTN_PAGED)) return;
  a.qseq = lz_arg(l, 4);
  a.qpos = lz_arg(l, 5);
  a.tseq = lz_fresh(l, "tseq");
  a.tlo = lz_fresh(l, "tlo");
  a.thi = lz_fresh(l, "thi");
  a.tlead = lz_fresh(l, "tlead");
  a.slo = lz_fresh(l, "slo");
  a.shi = lz_fresh(l, "shi");
  const rx_expr *n = a.q->shape[0], *mp = a.pt->shape[1];
  const rx_expr *grid[2] = {
      sx_div_c(a.l->cx, sx_add(a.l->cx, n, sx_const(a.l->cx, a.tq - 1)), a.tq),
      sx_const(a.l->cx, a.pages->shape[2]->value * a.gc)};
  open_kernel(&a, grid, 2);
  load_q(&a);
  token_table(&a);
  /* every key tile, for each sequence of the query tile (led by its first token) whose keys it
   * holds; one condition around the barriers of a tile (nested ones made ptxas spill) */
  const char *u = lz_loopvar(l, "u"), *kt = lz_loopvar(l, "kt");
  a.seq = lz_fresh(l, "seq");
  a.pid = lz_fresh(l, "pid");
  int64_t sub = ATTN_PAGE / a.tk;
  lz_line(l, "for %s in 0..%s {", kt, lz_ex(a.l, sx_mul_c(a.l->cx, mp, sub)));
  l->ind++;
  lz_line(l, "for %s in 0..%s {", u, tile_tokens(&a));
  l->ind++;
  a.jb = sx_mul_c(a.l->cx, sx_var(a.l->cx, kt), a.tk);
  a.off = sx_mul_c(a.l->cx, sx_mod_c(a.l->cx, sx_var(a.l->cx, kt), sub), a.tk);
  lz_line(l, "if %s[%s] != 0 && i32(%s) <= %s[%s] && i32(%s) >= %s[%s] {", a.tlead, u,
          lz_ex(a.l, a.jb), a.shi, u,
          lz_ex(a.l, sx_add(a.l->cx, a.jb, sx_const(a.l->cx, a.tk - 1))), a.slo, u);
  l->ind++;
  lz_line(l, "let %s: i32 = %s[%s]", a.seq, a.tseq, u);
  lz_line(l, "let %s: i32 = %s[%s, %s]", a.pid, a.pt->name, a.seq,
          lz_ex(a.l, sx_div_c(a.l->cx, sx_var(a.l->cx, kt), sub)));
  key_tile(&a);
  for (int i = 0; i < 3; i++) lz_close(l);
  finish(&a);
  for (int i = 0; i < 3; i++) lz_close(l);
}

/* lz_open_thread_items over the block's ATTN_THREADS threads (two levels to close). */
static const rx_expr *open_thread_items(lz_ctx *l, const char *tx, const char *c,
                                        const rx_expr *count) {
  return lz_open_thread_items(l, tx, c, ATTN_THREADS, count);
}

/* ------------------------------------------------------------------------------------------
 * prefill on matrix units: paged_attention with subgroup matrix fragments
 *
 * Beside the portable kernel above, paged_attention of f16 or bf16 holds a form on F x F x F
 * fragments (ir.h RX_STMT_FRAG; F = 16: CUDA mma.sync and Vulkan cooperative matrices, F = 8:
 * Metal simdgroup_matrix), each under `if has_fragments(T, f32, F, F, F)`, so a target with
 * those fragments compiles it and every other target the portable one (passes/schedule.h). The
 * elements of a fragment are opaque, so nothing reads one per row: the softmax goes through
 * shared memory, and the output accumulator, which the online softmax would have to rescale
 * row by row, stays in fragments by walking the keys twice:
 *
 *   pass 1, per key tile:  S = Q K^T on fragments -> shared; one thread per row: the running
 *                          max m and sum l of the row's scores (online, base 2)
 *   pass 2, per key tile:  S again; one thread per row: p = exp2(s - m) (the final m, so no
 *                          rescaling) rounded to T into shared; O += P V on fragments
 *   end:                   O / l, through shared memory a few fragments at a time
 *
 * Q K^T is computed twice (three products per tile instead of two), against a score tile and a
 * per-row rescale of the accumulator in shared memory (R x D f32, beyond Metal's 32 KiB for
 * R = 64, D = 128) on every tile. Rows and keys are those of the portable kernel: R query rows
 * per block (tokens x heads of a GQA group), key tiles of one page (16 keys), 128 threads =
 * four subgroups of 32; fragment number f of a product goes to subgroup f % 4. Shared rows are
 * padded by 16 bytes (row starts stay 16-byte aligned for the fragment loads; the rows of a
 * fragment fall in different banks).
 * ------------------------------------------------------------------------------------------ */

/* Shared memory of the fragment form, by fragment edge: the targets with 16 x 16 x 16 fragments
 * (CUDA sm_80 and sm_90, vulkan-nvidia) have 48 KiB per block, those with 8 x 8 x 8 (metal-apple7)
 * 32 KiB (targets.c; scheduling checks the kernel against its target). */
#define ATTN_FRAG_SHARED(f) ((f) >= 16 ? 49152 : 32768)
/* Subgroups of a block: ATTN_THREADS / 32 lanes. */
#define ATTN_WARPS (ATTN_THREADS / 32)

typedef struct fattn {
  attn *a;
  int f;                    /* the fragment edge F */
  int64_t pad;              /* elements of padding per shared row */
  int64_t ns, no;           /* fragments of S (R x tk) and of O (R x D) */
  const char *fa, *fb, *fs; /* the A, B and S fragments (scratch) */
  const char **fo;          /* the fragments of O this subgroup holds: slot s is O's
                               fragment s * ATTN_WARPS + warp */
  const char *pp, *sc;      /* P in T [R, tk]; the output staging, f32 [*, tk] (ps where it
                               holds ATTN_WARPS fragments of F x F) */
  const char *warp;         /* text: the subgroup of this thread */
} fattn;

static int64_t frag_shared_bytes(const attn *a, int64_t rows, int f) {
  int64_t es = ir_dtype_bits(a->t) / 8, pad = 16 / es;
  int64_t tk = ATTN_PAGE, d = a->dk;
  int64_t stage = ATTN_WARPS * f * f > rows * tk ? ATTN_WARPS * f * f : 0; /* else in ps */
  return es * (rows * (d + pad) + 2 * tk * (d + pad) + rows * tk) +
         4 * (rows * tk + 2 * rows + 6 * rows + stage);
}

/* The fragment form's rows per block (a power of two, at least F), or 0 where the head dim is
 * not a multiple of F or no tile fits. Sets a's tiling to it. */
static bool frag_tile(attn *a, int f) {
  if (a->dk != a->dv || a->dk % f || (a->t != RX_DTYPE_F16 && a->t != RX_DTYPE_BF16)) return false;
  int64_t rows = ATTN_MAX_ROWS;
  while (rows > f && frag_shared_bytes(a, rows, f) > ATTN_FRAG_SHARED(f)) rows /= 2;
  if (frag_shared_bytes(a, rows, f) > ATTN_FRAG_SHARED(f)) return false;
  a->rows = rows;
  a->tk = ATTN_PAGE;
  a->two = true;
  a->dm = a->dk;
  a->gr = a->group < a->rows ? a->group : a->rows;
  a->gc = cdiv(a->group, a->gr);
  a->tq = a->rows / a->gr;
  return true;
}

/* The number of the fragment that this thread's subgroup computes in slot s. */
static const rx_expr *frag_number(fattn *fa, int64_t s) {
  attn *a = fa->a;
  return sx_add(a->l->cx, sx_const(a->l->cx, s * ATTN_WARPS),
                sx_div_c(a->l->cx, sx_var(a->l->cx, a->tx), 32));
}

/* The first row and column (text) of fragment number e of a product cols fragments wide. */
static void frag_origin(fattn *fa, const rx_expr *e, int64_t cols, const char **row,
                        const char **col) {
  attn *a = fa->a;
  *row = lz_ex(a->l, sx_mul_c(a->l->cx, sx_div_c(a->l->cx, e, cols), fa->f));
  *col = lz_ex(a->l, sx_mul_c(a->l->cx, sx_mod_c(a->l->cx, e, cols), fa->f));
}

/* Opens the `if` that holds fragment number e when the count is not a multiple of the
 * subgroups (the condition is the same on every lane of a subgroup); returns the levels to
 * close. */
static int frag_guard(fattn *fa, const rx_expr *e, int64_t count) {
  if (count % ATTN_WARPS == 0) return 0;
  lz_line(fa->a->l, "if %s {",
          lz_ex(fa->a->l, sx_lt(fa->a->l->cx, e, sx_const(fa->a->l->cx, count))));
  fa->a->l->ind++;
  return 1;
}

/* The kernel of the fragment form: block loops, threads, shared buffers, fragments. */
static void frag_open(fattn *fa, const rx_expr *const *grid) {
  attn *a = fa->a;
  lz_ctx *l = a->l;
  const char *bv[2] = {a->bx, a->by}, *axis[2] = {"x", "y"};
  for (int i = 0; i < 2; i++) {
    lz_line(l, "for %s in 0..%s bind(blockIdx.%s) {", bv[i], lz_ex(a->l, grid[i]), axis[i]);
    l->ind++;
  }
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", a->tx, ATTN_THREADS);
  l->ind++;
  const char *t = ir_dtype_name(a->t);
  int64_t row = a->dk + fa->pad, f = fa->f;
  lz_line(l, "alloc %s: %s[%lld, %lld] shared", a->qs, t, (long long)a->rows, (long long)row);
  lz_line(l, "alloc %s: %s[%lld, %lld] shared", a->kv, t, (long long)a->tk, (long long)row);
  lz_line(l, "alloc %s: %s[%lld, %lld] shared", a->vs, t, (long long)a->tk, (long long)row);
  /* the cp.async kernel's rows of ps one word apart in bank (its row step's threads, one a row,
   * write and read them at the same key: tk words apart, 16 or 32, were 2 to 4 in one bank) */
  lz_line(l, "alloc %s: f32[%lld, %lld] shared", a->ps, (long long)a->rows,
          (long long)(a->tk + (a->stages ? 1 : 0)));
  lz_line(l, "alloc %s: %s[%lld, %lld] shared", fa->pp, t, (long long)a->rows, (long long)a->tk);
  lz_line(l, "alloc %s: f32[%lld] shared", a->lsum, (long long)a->rows);
  if (ATTN_WARPS * f * f > a->rows * a->tk)
    lz_line(l, "alloc %s: f32[%lld, %lld] shared", fa->sc, (long long)(ATTN_WARPS * f * f / a->tk),
            (long long)a->tk);
  lz_line(l, "alloc %s: f32[1] local", a->mrow);
  lz_line(l, "alloc %s: f32[1] local", a->lrow);
  lz_line(l, "%s[0] = %s", a->mrow, lz_flit(l, ATTN_NO_SCORE));
  lz_line(l, "%s[0] = 0.0", a->lrow);
  lz_line(l, "alloc %s: %s[%d, %d] fragment a", fa->fa, t, fa->f, fa->f);
  lz_line(l, "alloc %s: %s[%d, %d] fragment b", fa->fb, t, fa->f, fa->f);
  lz_line(l, "alloc %s: f32[%d, %d] fragment acc", fa->fs, fa->f, fa->f);
  for (int64_t s = 0; s < cdiv(fa->no, ATTN_WARPS); s++)
    lz_line(l, "alloc %s: f32[%d, %d] fragment acc", fa->fo[s], fa->f, fa->f);
}

/* ps = Q K^T of the key tile in kv (unscaled), fragment by fragment. */
static void frag_scores(fattn *fa) {
  attn *a = fa->a;
  lz_ctx *l = a->l;
  int64_t f = fa->f, row = a->dk + fa->pad, cols = a->tk / f;
  for (int64_t s = 0; s < cdiv(fa->ns, ATTN_WARPS); s++) {
    const rx_expr *e = frag_number(fa, s);
    int g = frag_guard(fa, e, fa->ns);
    const char *i, *j;
    frag_origin(fa, e, cols, &i, &j);
    const char *kc = lz_loopvar(l, "kc");
    lz_line(l, "frag fill %s, 0.0", fa->fs);
    lz_line(l, "for %s in 0..%lld {", kc, (long long)(a->dk / f));
    l->ind++;
    lz_line(l, "frag load %s, %s[%s, %s * %lld], %lld", fa->fa, a->qs, i, kc, (long long)f,
            (long long)row);
    lz_line(l, "frag load %s, %s[%s, %s * %lld], %lld, col_major", fa->fb, a->kv, j, kc,
            (long long)f, (long long)row);
    lz_line(l, "frag mma %s, %s, %s, %s", fa->fs, fa->fa, fa->fb, fa->fs);
    lz_close(l);
    lz_line(l, "frag store %s, %s[%s, %s], %lld", fa->fs, a->ps, i, j, (long long)a->tk);
    close_n(a, g);
  }
}

/* Pass 1, one thread per row: the running max and sum of the row's visible scores. */
static void frag_stats(fattn *fa) {
  attn *a = fa->a;
  lz_ctx *l = a->l;
  lz_line(l, "if %s < %lld {", a->tx, (long long)a->rows);
  l->ind++;
  row_lets(a);
  const char *tm = lz_fresh(l, "tm"), *ls = lz_fresh(l, "ls"), *j = lz_loopvar(l, "j");
  lz_line(l, "alloc %s: f32[1] local", tm);
  lz_line(l, "%s[0] = %s[0]", tm, a->mrow);
  lz_line(l, "for %s in 0..%lld {", j, (long long)a->tk);
  l->ind++;
  bool g = open_if(a, key_visible(a, sx_var(a->l->cx, j)));
  lz_line(l, "%s[0] = max(%s[0], %s)", tm, tm, scored(a, lz_str(l, "%s[%s, %s]", a->ps, a->tx, j)));
  if (g) lz_close(l);
  lz_close(l);
  const char *j2 = lz_loopvar(l, "j");
  lz_line(l, "alloc %s: f32[1] local", ls);
  lz_line(l, "%s[0] = 0.0", ls);
  lz_line(l, "for %s in 0..%lld {", j2, (long long)a->tk);
  l->ind++;
  g = open_if(a, key_visible(a, sx_var(a->l->cx, j2)));
  lz_line(l, "%s[0] = %s[0] + exp2(%s - %s[0])", ls, ls,
          scored(a, lz_str(l, "%s[%s, %s]", a->ps, a->tx, j2)), tm);
  if (g) lz_close(l);
  lz_close(l);
  lz_line(l, "%s[0] = %s[0] * exp2(%s[0] - %s[0]) + %s[0]", a->lrow, a->lrow, a->mrow, tm, ls);
  lz_line(l, "%s[0] = %s[0]", a->mrow, tm);
  lz_close(l);
}

/* Pass 2, one thread per row: p = exp2(s - m) of the visible keys (0 elsewhere) into pp. */
static void frag_probs(fattn *fa) {
  attn *a = fa->a;
  lz_ctx *l = a->l;
  lz_line(l, "if %s < %lld {", a->tx, (long long)a->rows);
  l->ind++;
  row_lets(a);
  const char *j = lz_loopvar(l, "j");
  lz_line(l, "for %s in 0..%lld {", j, (long long)a->tk);
  l->ind++;
  const char *e =
      lz_str(l, "exp2(%s - %s[0])", scored(a, lz_str(l, "%s[%s, %s]", a->ps, a->tx, j)), a->mrow);
  const char *vis = key_visible(a, sx_var(a->l->cx, j));
  lz_line(l, "%s[%s, %s] = %s", fa->pp, a->tx, j,
          lz_down(l, a->t, vis ? lz_str(l, "select(%s, %s, 0.0)", vis, e) : e));
  lz_close(l);
  lz_close(l);
}

/* O += P V: each subgroup its fragments of O over the tile's keys. */
static void frag_pv(fattn *fa) {
  attn *a = fa->a;
  lz_ctx *l = a->l;
  int64_t f = fa->f, row = a->dk + fa->pad, cols = a->dk / f;
  for (int64_t s = 0; s < cdiv(fa->no, ATTN_WARPS); s++) {
    const rx_expr *e = frag_number(fa, s);
    int g = frag_guard(fa, e, fa->no);
    const char *i, *c;
    frag_origin(fa, e, cols, &i, &c);
    for (int64_t kc = 0; kc < a->tk / f; kc++) {
      lz_line(l, "frag load %s, %s[%s, %lld], %lld", fa->fa, fa->pp, i, (long long)(kc * f),
              (long long)a->tk);
      lz_line(l, "frag load %s, %s[%lld, %s], %lld", fa->fb, a->vs, (long long)(kc * f), c,
              (long long)row);
      lz_line(l, "frag mma %s, %s, %s, %s", fa->fo[s], fa->fa, fa->fb, fa->fo[s]);
    }
    close_n(a, g);
  }
}

/* The rows' outputs O / l (0 for a row that saw no key): each subgroup stores one fragment of O
 * at a time into the staging buffer, from where the threads write the valid rows. */
static void frag_finish(fattn *fa) {
  attn *a = fa->a;
  lz_ctx *l = a->l;
  int64_t f = fa->f, cols = a->dk / f, ff = f * f;
  lz_line(l, "if %s < %lld {", a->tx, (long long)a->rows);
  lz_line(l, "  %s[%s] = %s[0]", a->lsum, a->tx, a->lrow);
  lz_line(l, "}");
  for (int64_t s = 0; s < cdiv(fa->no, ATTN_WARPS); s++) {
    const rx_expr *e = frag_number(fa, s);
    int g = frag_guard(fa, e, fa->no);
    lz_line(l, "frag store %s, %s[%s, 0], %lld", fa->fo[s], fa->sc,
            lz_ex(a->l,
                  sx_mul_c(a->l->cx, sx_div_c(a->l->cx, sx_var(a->l->cx, a->tx), 32), ff / a->tk)),
            (long long)f);
    close_n(a, g);
    lz_line(l, "barrier");
    const char *c = lz_loopvar(l, "c");
    const rx_expr *el = open_thread_items(l, a->tx, c, sx_const(a->l->cx, ATTN_WARPS * ff));
    const rx_expr *fr = sx_add(a->l->cx, sx_const(a->l->cx, s * ATTN_WARPS),
                               sx_div_c(a->l->cx, el, ff)); /* O's fragment */
    const rx_expr *r = sx_add(a->l->cx, sx_mul_c(a->l->cx, sx_div_c(a->l->cx, fr, cols), f),
                              sx_div_c(a->l->cx, sx_mod_c(a->l->cx, el, ff), f));
    const rx_expr *d = sx_add(a->l->cx, sx_mul_c(a->l->cx, sx_mod_c(a->l->cx, fr, cols), f),
                              sx_mod_c(a->l->cx, el, f));
    const rx_expr *ok =
        sx_and(a->l->cx, row_valid(a, r), sx_lt(a->l->cx, fr, sx_const(a->l->cx, fa->no)));
    int levels = 2 + open_if(a, cond(a, ok));
    const char *lr = lz_str(l, "%s[%s]", a->lsum, lz_ex(a->l, r));
    const char *v = lz_str(l, "select(%s > 0.0, %s[%s, %s] / %s, 0.0)", lr, fa->sc,
                           lz_ex(a->l, sx_div_c(a->l->cx, el, a->tk)),
                           lz_ex(a->l, sx_mod_c(a->l->cx, el, a->tk)), lr);
    lz_line(l, "%s = %s", row_elem(a, a->y, r, d), lz_down(l, a->y->dtype, v));
    close_n(a, levels);
    lz_line(l, "barrier");
  }
}

/* One pass over the key tiles of the block's sequences (as lz_gen_paged_attention walks them):
 * pass 1 (second false) or pass 2. */
static void frag_pass(fattn *fa, bool second) {
  attn *a = fa->a;
  lz_ctx *l = a->l;
  const char *u = lz_loopvar(l, "u"), *kt = lz_loopvar(l, "kt");
  a->seq = lz_fresh(l, "seq");
  a->pid = lz_fresh(l, "pid");
  lz_line(l, "for %s in 0..%s {", kt, lz_ex(a->l, a->pt->shape[1]));
  l->ind++;
  lz_line(l, "for %s in 0..%s {", u, tile_tokens(a));
  l->ind++;
  a->jb = sx_mul_c(a->l->cx, sx_var(a->l->cx, kt), a->tk);
  a->off = sx_const(a->l->cx, 0);
  lz_line(l, "if %s[%s] != 0 && i32(%s) <= %s[%s] && i32(%s) >= %s[%s] {", a->tlead, u,
          lz_ex(a->l, a->jb), a->shi, u,
          lz_ex(a->l, sx_add(a->l->cx, a->jb, sx_const(a->l->cx, a->tk - 1))), a->slo, u);
  l->ind++;
  lz_line(l, "let %s: i32 = %s[%s]", a->seq, a->tseq, u);
  lz_line(l, "let %s: i32 = %s[%s, %s]", a->pid, a->pt->name, a->seq, kt);
  load_keys(a, 0);
  if (second) load_keys(a, 1);
  lz_line(l, "barrier");
  frag_scores(fa);
  lz_line(l, "barrier");
  if (!second) {
    frag_stats(fa);
  } else {
    frag_probs(fa);
    lz_line(l, "barrier");
    frag_pv(fa);
    lz_line(l, "barrier");
  }
  close_n(a, 3);
}

/* The fragment form of paged_attention for fragments of edge f (false, with nothing written,
 * where the head dim or the dtype does not suit it). */
static bool frag_paged(lz_ctx *l, int f) {
  attn a;
  if (!paged_start(&a, l, ATTN_PAGED) || !frag_tile(&a, f)) return false;
  fattn fa = {.a = &a, .f = f, .pad = 16 / (ir_dtype_bits(a.t) / 8)};
  fa.ns = (a.rows / f) * (a.tk / f);
  fa.no = (a.rows / f) * (a.dk / f);
  fa.fa = lz_fresh(l, "fq");
  fa.fb = lz_fresh(l, "fk");
  fa.fs = lz_fresh(l, "fs");
  fa.pp = lz_fresh(l, "pp");
  fa.sc = ATTN_WARPS * f * f > a.rows * a.tk ? lz_fresh(l, "stage") : a.ps;
  fa.fo = ir_module_alloc(l->m, sizeof *fa.fo * (size_t)cdiv(fa.no, ATTN_WARPS));
  for (int64_t s = 0; s < cdiv(fa.no, ATTN_WARPS); s++) fa.fo[s] = lz_fresh(l, "fo");
  fa.warp = lz_str(l, "%s // 32", a.tx);
  a.qseq = lz_arg(l, 4);
  a.qpos = lz_arg(l, 5);
  a.tseq = lz_fresh(l, "tseq");
  a.tlo = lz_fresh(l, "tlo");
  a.thi = lz_fresh(l, "thi");
  a.tlead = lz_fresh(l, "tlead");
  a.slo = lz_fresh(l, "slo");
  a.shi = lz_fresh(l, "shi");
  lz_line(l, "if has_fragments(%s, f32, %d, %d, %d) {", ir_dtype_name(a.t), f, f, f);
  l->ind++;
  const rx_expr *n = a.q->shape[0];
  const rx_expr *grid[2] = {
      sx_div_c(a.l->cx, sx_add(a.l->cx, n, sx_const(a.l->cx, a.tq - 1)), a.tq),
      sx_const(a.l->cx, a.pages->shape[2]->value * a.gc)};
  frag_open(&fa, grid);
  load_q(&a);
  token_table(&a);
  frag_pass(&fa, false);
  for (int64_t s = 0; s < cdiv(fa.no, ATTN_WARPS); s++) lz_line(l, "frag fill %s, 0.0", fa.fo[s]);
  frag_pass(&fa, true);
  frag_finish(&fa);
  close_n(&a, 3);
  return true; /* the `if has_fragments` stays open: the caller writes the else */
}

void lz_gen_paged_attention(lz_ctx *l) {
  /* FlashAttention-3's form on wgmma where the target runs it (ops/attention_fa3.c), else
   * FlashAttention-2 on mma.sync (ops/attention_fa2.c), else on matrix units where the target
   * has fragments (16 x 16, else 8 x 8), else the portable kernel: if has_wgmma(...) { ... }
   * else { if has_mma(...) { ... } else { if has_fragments(...) { ... } else { ... } } } */
  int open = 0;
  if (lz_gen_paged_attention_fa3(l)) {
    l->ind--;
    lz_line(l, "} else {");
    l->ind++;
    open++;
  }
  if (lz_gen_paged_attention_fa2(l)) {
    l->ind--;
    lz_line(l, "} else {");
    l->ind++;
    open++;
  }
  static const int edges[] = {16, 8};
  for (size_t i = 0; i < RX_ARRAY_LEN(edges); i++)
    if (frag_paged(l, edges[i])) {
      l->ind--;
      lz_line(l, "} else {");
      l->ind++;
      open++;
    }
  paged_portable(l);
  for (int i = 0; i < open; i++) lz_close(l);
}

/* ------------------------------------------------------------------------------------------
 * paged_decode_attention
 *
 * A block per (sequence, kv head x group chunk, chunk of the cache): the rows of the block are
 * the query heads of one GQA group (all of it where the accumulators fit: ATTN_MAX_ACC, and
 * ATTN_ASYNC_MAX_ACC in the cp.async kernel), so each key and value of the chunk is read from
 * memory once for the whole group. The portable kernel walks the chunk's key tiles as key_tile
 * does, waiting for each tile's loads. On targets with
 * async_copy (`if has_async_copy()`, ir.h: CUDA sm_80 and newer, cp.async) the kernel keeps
 * ATTN_STAGES tiles of keys and values in shared memory (rows padded to 16 bytes), filled by
 * async_copy of 16 bytes per thread and copy, ATTN_STAGES - 1 tiles ahead of the one being
 * computed:
 *
 *   start:    the chunk's page ids from the page table into shared memory, a barrier
 *   prologue: tiles 0 .. S - 2 issued, one commit group each (empty where a tile has no key)
 *   tile t:   async_wait S - 2 (tile t has landed) -> barrier -> issue tile t + S - 1 into the
 *             stage tile t - 1 used, commit -> scores (lane_scores: 8 lanes a key, 16-byte
 *             reads, shuffle_xor; as [key, row]) -> barrier -> row step -> barrier -> acc += p V
 *
 * so three barriers per tile, and S - 1 tiles in flight while one is computed. A tile outside
 * the sequence's keys (past kv_len, before the window, past the page table) is neither copied
 * nor computed; the conditions are the same for the whole block.
 * ------------------------------------------------------------------------------------------ */

/* The key tile that starts at position jb holds a key of the block's range (text). */
static const char *tile_in_range(attn *a, const rx_expr *jb) {
  return lz_str(a->l, "i32(%s) <= %s && i32(%s) >= %s && %s", lz_ex(a->l, jb), a->hi,
                lz_ex(a->l, sx_add(a->l->cx, jb, sx_const(a->l->cx, a->tk - 1))), a->lo,
                lz_ex(a->l, sx_lt(a->l->cx, jb, sx_mul_c(a->l->cx, a->pt->shape[1], ATTN_PAGE))));
}

/* The kernel's first lines after q: the block's key range lo .. hi. */
static void decode_range(attn *a) {
  lz_ctx *l = a->l;
  const char *kl = lz_fresh(l, "kl");
  lz_line(l, "let %s: i32 = %s[%s]", kl, a->kvlen->name, a->bx);
  lz_line(l, "let %s: i32 = %s - 1", a->hi, kl);
  if (a->window > 0)
    lz_line(l, "let %s: i32 = max(0, %s - %lld)", a->lo, kl, (long long)a->window);
  else
    lz_line(l, "let %s: i32 = 0", a->lo);
}

/* The first key position of tile kt of the block's chunk. */
static const rx_expr *decode_jb(attn *a, const rx_expr *kt) {
  return sx_add(a->l->cx, sx_mul_c(a->l->cx, sx_var(a->l->cx, a->bz), a->chunk),
                sx_mul_c(a->l->cx, kt, a->tk));
}

/* The portable kernel. */
static void decode_portable(lz_ctx *l) {
  attn a;
  if (!paged_start(&a, l, ATTN_DECODE)) return;
  a.lse = &l->outs[1];
  const rx_expr *b = a.q->shape[0], *chunks = a.y->shape[2];
  const rx_expr *grid[3] = {b, sx_const(a.l->cx, a.pages->shape[2]->value * a.gc), chunks};
  const char *kt = lz_loopvar(l, "kt");
  a.lo = lz_fresh(l, "lo");
  a.hi = lz_fresh(l, "hi");
  a.pid = lz_fresh(l, "pid");
  open_kernel(&a, grid, 3);
  load_q(&a);
  decode_range(&a);
  lz_line(l, "for %s in 0..%lld {", kt, (long long)(a.chunk / a.tk));
  l->ind++;
  a.jb = decode_jb(&a, sx_var(a.l->cx, kt));
  a.off = sx_mod_c(a.l->cx, a.jb, ATTN_PAGE);
  lz_line(l, "if %s {", tile_in_range(&a, a.jb));
  l->ind++;
  lz_line(l, "let %s: i32 = %s[%s, %s]", a.pid, a.pt->name, a.bx,
          lz_ex(a.l, sx_div_c(a.l->cx, a.jb, ATTN_PAGE)));
  key_tile(&a);
  lz_close(l);
  lz_close(l);
  finish(&a);
  for (int i = 0; i < 4; i++) lz_close(l);
}

/* The page ids of the block's chunk (those the page table has) into the shared pids, read once
 * at the start: a tile's copies then wait for a shared load, not for a global one each. */
static void chunk_pages(attn *a) {
  lz_ctx *l = a->l;
  rx_expr_ctx *cx = l->cx;
  int64_t n = a->chunk / ATTN_PAGE;
  a->pids = lz_fresh(l, "pids");
  lz_line(l, "alloc %s: i32[%lld] shared", a->pids, (long long)n);
  const rx_expr *e = open_thread_items(l, a->tx, lz_loopvar(l, "c"), sx_const(cx, n));
  const rx_expr *page = sx_add(cx, sx_mul_c(cx, sx_var(cx, a->bz), n), e);
  lz_line(l, "if %s {", lz_ex(l, sx_lt(cx, page, a->pt->shape[1])));
  lz_line(l, "  %s[%s] = %s[%s, %s]", a->pids, lz_ex(l, e), a->pt->name, a->bx, lz_ex(l, page));
  lz_line(l, "}");
  close_n(a, 2);
  lz_line(l, "barrier");
}

/* Issues the async copies of key tile kt (its keys into kv, its values into vs, at stage
 * kt % stages) where the tile is in range and exists (kt < tiles; NULL: it does), then commits
 * the thread's group (empty or not, so that every thread counts the same groups). */
static void issue_tile(attn *a, const rx_expr *kt, int64_t tiles) {
  lz_ctx *l = a->l;
  rx_expr_ctx *cx = l->cx;
  const rx_expr *jb = decode_jb(a, kt);
  const rx_expr *exists = sym_expr_simplify(cx, sx_lt(cx, kt, sx_const(cx, tiles)));
  if (!rx_expr_is_const(exists, 0)) {
    lz_line(l, "if %s {", both(a, cond(a, exists), tile_in_range(a, jb)));
    l->ind++;
    const char *pid = lz_fresh(l, "pid");
    lz_line(l, "let %s: i32 = %s[%s]", pid, a->pids,
            lz_ex(l, sx_div_c(cx, sx_mul_c(cx, kt, a->tk), ATTN_PAGE)));
    int64_t lanes = 16 / (ir_dtype_bits(a->t) / 8);
    const rx_expr *srow = sx_mul_c(cx, sx_mod_c(cx, kt, a->stages), a->tk);
    for (int which = 0; which < 2; which++) {
      cover c = cover_of(a->tk, (which ? a->dv : a->dk) / lanes);
      int levels = open_cover(a, &c);
      const rx_expr *jj = cover_row(a, &c), *d = sx_mul_c(cx, cover_col(a, &c), lanes);
      lz_line(l, "async_copy %s[%s, %s] = %s[%s, %d, %s, %s, %s]", which ? a->vs : a->kv,
              lz_ex(l, sx_add(cx, srow, jj)), lz_ex(l, d), a->pages->name, pid, which,
              lz_ex(l, kv_head(a)), lz_ex(l, sx_add(cx, sx_mod_c(cx, jb, ATTN_PAGE), jj)),
              lz_ex(l, d));
      close_n(a, levels);
    }
    lz_close(l);
  }
  lz_line(l, "async_commit");
}

/* The cp.async kernel under `if has_async_copy() {`, left open for the caller's else; false,
 * with nothing written, where its tiles do not fit (head dims not a multiple of 16 bytes, or
 * too large for ATTN_ASYNC_MIN_TILE keys in ATTN_STAGES stages). */
static bool async_decode(lz_ctx *l) {
  attn a;
  int64_t es;
  if (!attn_start(&a, l, ATTN_DECODE)) return false;
  a.pages = lz_arg(l, 1);
  a.pt = lz_arg(l, 2);
  a.kvlen = lz_arg(l, 3);
  int64_t heads, kvh;
  if (!const_dim(&a, a.q, 1, "the query heads H", &heads) ||
      !const_dim(&a, a.q, 2, "the head dim D", &a.dk) ||
      !const_dim(&a, a.pages, 2, "the kv heads KVH", &kvh))
    return false;
  a.dv = a.dk;
  a.group = heads / kvh;
  es = ir_dtype_bits(a.t) / 8;
  a.stages = ATTN_STAGES;
  a.pad = 16 / es;
  if (a.dk % (16 / es) || !attn_tile(&a)) return false;
  a.lse = &l->outs[1];
  lz_line(l, "if has_async_copy() {");
  l->ind++;
  const rx_expr *grid[3] = {a.q->shape[0], sx_const(l->cx, kvh * a.gc), a.y->shape[2]};
  const char *kt = lz_loopvar(l, "kt");
  int64_t tiles = a.chunk / a.tk;
  a.lo = lz_fresh(l, "lo");
  a.hi = lz_fresh(l, "hi");
  open_kernel(&a, grid, 3);
  load_q(&a);
  decode_range(&a);
  chunk_pages(&a);
  for (int64_t s = 0; s + 1 < a.stages; s++) issue_tile(&a, sx_const(l->cx, s), tiles);
  lz_line(l, "for %s in 0..%lld {", kt, (long long)tiles);
  l->ind++;
  const rx_expr *t = sx_var(l->cx, kt);
  lz_line(l, "async_wait %lld", (long long)(a.stages - 2));
  lz_line(l, "barrier");
  if (tiles > a.stages - 1) /* else the prologue issued every tile */
    issue_tile(&a, sx_add(l->cx, t, sx_const(l->cx, a.stages - 1)), tiles);
  else
    lz_line(l, "async_commit");
  a.jb = decode_jb(&a, t);
  a.srow = sx_mul_c(l->cx, sx_mod_c(l->cx, t, a.stages), a.tk);
  lz_line(l, "if %s {", tile_in_range(&a, a.jb));
  l->ind++;
  if (!lane_scores(&a)) partial_scores(&a);
  lz_line(l, "barrier");
  row_step(&a);
  lz_line(l, "barrier");
  accumulate(&a);
  close_n(&a, 2);
  finish(&a);
  close_n(&a, 4);
  return true;
}

void lz_gen_paged_decode_attention(lz_ctx *l) {
  /* if has_async_copy() { the cp.async kernel } else { the portable one } */
  bool async = async_decode(l);
  if (async) {
    l->ind--;
    lz_line(l, "} else {");
    l->ind++;
  }
  decode_portable(l);
  if (async) lz_close(l);
}

/* pages[slot // 16, 0 / 1, h, slot % 16, :] = k / v[t, h, :]: a block per token. The program's
 * parameters are k, v, slot and `out pages` (ops_legalize_inplace_arg): it writes only the slots
 * given and leaves the rest of the cache as it is. */
void lz_gen_kv_append(lz_ctx *l) {
  for (int i = 0; i < 4; i++)
    if (lz_arg(l, i)->scalar) {
      lz_fail(l, "expects tensor operands");
      return;
    }
  lz_opnd *k = lz_arg(l, 1), *v = lz_arg(l, 2), *slot = lz_arg(l, 3), *pages = &l->outs[0];
  rx_expr_ctx *cx = l->cx;
  const rx_expr *n = k->shape[0], *d = k->shape[2];
  const rx_expr *elems = sym_expr_mul(cx, k->shape[1], d);
  const char *t = lz_loopvar(l, "t"), *tx = lz_loopvar(l, "tx"), *c = lz_loopvar(l, "c");
  const char *sl = lz_fresh(l, "sl");
  lz_line(l, "for %s in 0..%s bind(blockIdx.x) {", t, lz_ex(l, n));
  l->ind++;
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", tx, ATTN_THREADS);
  l->ind++;
  lz_line(l, "let %s: i32 = %s[%s]", sl, slot->name, t);
  const rx_expr *e = open_thread_items(l, tx, c, elems);
  const char *h = lz_ex(l, sym_expr_floordiv(cx, e, d)),
             *dd = lz_ex(l, sym_expr_floormod(cx, e, d));
  for (int which = 0; which < 2; which++)
    lz_line(l, "%s[%s // %d, %d, %s, %s %% %d, %s] = %s[%s, %s, %s]", pages->name, sl, ATTN_PAGE,
            which, h, sl, ATTN_PAGE, dd, which ? v->name : k->name, t, h, dd);
  for (int i = 0; i < 4; i++) lz_close(l);
}

/* Columns of the merge per thread: 4 f32 of o, one 16-byte load. */
#define MERGE_LANES 4

/* y[b, h, :] = sum over chunks s of w_s o[b, h, s, :] / sum w_s, w_s = exp(lse_s - max lse): a
 * block per (sequence, head); chunks with lse = -inf weigh 0, and a row whose chunks are all
 * empty is 0. */
void lz_gen_attention_merge(lz_ctx *l) {
  lz_opnd *o = lz_arg(l, 0), *lse = lz_arg(l, 1), *y = &l->outs[0];
  if (o->scalar || lse->scalar) {
    lz_fail(l, "expects tensor operands");
    return;
  }
  rx_expr_ctx *cx = l->cx;
  const rx_expr *d = o->shape[3];
  const char *b = lz_loopvar(l, "b"), *h = lz_loopvar(l, "h"), *tx = lz_loopvar(l, "tx");
  const char *s = lz_loopvar(l, "s"), *c = lz_loopvar(l, "c"), *s2 = lz_loopvar(l, "s");
  const char *mx = lz_fresh(l, "mx"), *num = lz_fresh(l, "num"), *den = lz_fresh(l, "den");
  const char *w = lz_fresh(l, "w");
  lz_line(l, "for %s in 0..%s bind(blockIdx.x) {", b, lz_ex(l, o->shape[0]));
  l->ind++;
  lz_line(l, "for %s in 0..%s bind(blockIdx.y) {", h, lz_ex(l, o->shape[1]));
  l->ind++;
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", tx, ATTN_THREADS);
  l->ind++;
  lz_line(l, "alloc %s: f32[1] local", mx);
  lz_line(l, "%s[0] = %s", mx, lz_flit(l, ATTN_NO_SCORE));
  lz_line(l, "for %s in 0..%s {", s, lz_ex(l, o->shape[2]));
  lz_line(l, "  %s[0] = max(%s[0], %s[%s, %s, %s])", mx, mx, lse->name, b, h, s);
  lz_line(l, "}");
  /* each thread a group of `lanes` columns: 16-byte loads of o (f32) when the head dim is a
   * constant multiple of 4 (the head dims of real models), one column otherwise */
  int64_t lanes = d->kind == RX_EXPR_CONST && d->value % MERGE_LANES == 0 ? MERGE_LANES : 1;
  const rx_expr *groups = sym_expr_floordiv(cx, d, sym_expr_const(cx, lanes));
  const rx_expr *e = open_thread_items(l, tx, c, groups);
  const rx_expr *col0 = sym_expr_mul(cx, e, sym_expr_const(cx, lanes)); /* the group's first */
  const char *v = lz_loopvar(l, "v"), *v2 = lz_loopvar(l, "v");
  const char *kind = lanes > 1 ? "vectorize" : "unroll";
  lz_line(l, "alloc %s: f32[%lld] local", num, (long long)lanes);
  lz_line(l, "alloc %s: f32[1] local", den);
  lz_line(l, "for %s in 0..%s {", s2, lz_ex(l, o->shape[2]));
  l->ind++;
  lz_line(l, "let %s: f32 = exp(%s[%s, %s, %s] - %s[0])", w, lse->name, b, h, s2, mx);
  const char *dd = lz_ex(l, sym_expr_add(cx, col0, sym_expr_var(cx, v)));
  lz_line(l, "for %s in 0..%lld %s {", v, (long long)lanes, kind);
  lz_line(l, "  %s[%s] = %s[%s] + %s * %s[%s, %s, %s, %s]", num, v, num, v, w, o->name, b, h, s2,
          dd);
  lz_line(l, "}");
  lz_line(l, "%s[0] = %s[0] + %s", den, den, w);
  lz_close(l);
  const char *dd2 = lz_ex(l, sym_expr_add(cx, col0, sym_expr_var(cx, v2)));
  lz_line(l, "for %s in 0..%lld %s {", v2, (long long)lanes, kind);
  lz_line(l, "  %s[%s, %s, %s] = %s", y->name, b, h, dd2,
          lz_down(l, y->dtype,
                  lz_str(l, "select(%s[0] > 0.0, %s[%s] / %s[0], 0.0)", den, num, v2, den)));
  lz_line(l, "}");
  for (int i = 0; i < 5; i++) lz_close(l);
}
