/* ops/moe.c: the Mixture-of-Experts ops (issue 32): tokens grouped by expert into a ragged
 * packing (ops/ragged.c's indptr), the grouped GEMM over those groups (prefill) and the
 * gathered-expert GEMV (decode). docs/ops.md, section "Mixture of experts". The contract:
 *
 *   moe_group(experts, num_experts=E) -> (indptr i32[E + 1], order i32[n k])
 *     experts [n, k] (i32 or i64: topk's indices), each token's k expert ids in 0 .. E - 1.
 *     order lists the n k (token, slot) pairs p = t k + s sorted by expert, stably (ascending p
 *     within an expert); expert e's pairs are order[indptr[e] .. indptr[e + 1] - 1] (empty when
 *     no token chose e); indptr[0] = 0, indptr[E] = n k. An id outside 0 .. E - 1 fails the
 *     call at run time, naming the op.
 *
 *   moe_matmul(x, w, [s, [z]], indptr, order, top_k=k, gathered=false, gated=false, scheme=)
 *     -> y [n k, N] of x's dtype. For each expert e and j in indptr[e] .. indptr[e + 1] - 1:
 *     y[order[j]] = x[r] w[e]^T with r = order[j] // k (x [n, K]: the token's row, shared by its
 *     k slots) or, gathered, r = order[j] (x [n k, K] in (token, slot) order: e.g. the gated
 *     up-projection's output fed to the down-projection). y is in (token, slot) order.
 *
 *   moe_gemv(x, w, [s, [z]], experts, gathered=false, gated=false, scheme=) -> y [n k, N]:
 *     the decode form of the same product, without grouping: row t k + s of y is x[t] (gathered:
 *     x[t k + s]) w[experts[t, s]]^T; each (token, slot) reads only its expert's weight rows.
 *
 *   w: the experts stacked on a leading axis, Hugging Face's [out, in] rows: [E, N, K] of f16,
 *   bf16 or f32, or, with scheme=, quant_matmul's buffers of that scheme each with a leading E
 *   axis (w [E, N, bytes], s [E, N, K / block] f16, z [E, N, K / block] u8): quant.c's element
 *   reader decodes them, so every scheme (q4f16_g32, q8, the GGUF blocks) works unchanged.
 *   gated=true: w [E, 2F, K] is the gate projection's F rows then the up projection's F rows of
 *   each expert (the checkpoint's gate_proj and up_proj concatenated along out), and y [n k, F]
 *   = T(silu(T(x gate^T))) * T(x up^T), the SwiGLU in the epilogue: one launch for both.
 *
 *   The combine y[t] = sum_s weight[t, s] down[t k + s] stays existing ops (reshape to
 *   [n, k, N], multiply by the routing weights [n, k, 1], sum over axis 1).
 *
 * The legalized programs serve every target (CUDA, Vulkan, Metal, the interpreter): moe_group a
 * counting sort in one block (per expert: counts, a scan in shared memory, a stable scatter);
 * moe_matmul tiles of one group's rows by output columns staged in shared memory
 * (lz_gen_moe_matmul); moe_gemv a reduction per output point that the matmul rule takes as a
 * GEMV of one row per (token, slot), the expert id an indirect row offset (matmul_match.c,
 * row_as_batch; gemv.c's gemv_rows: packed bytes staged 16 a lane, scales read once). */
#include "deduce.h"
#include "legalize_int.h"

#include "../base/quant.h"

#include <string.h>

/* The most experts moe_group takes (its ids are checked against E; the group tables are i32). */
#define MOE_MAX_EXPERTS 65536
/* Threads per block of the bound programs (moe_group, moe_matmul): 128, the least limit of the
 * targets (targets/targets.c, vulkan's portable 128). */
#define MOE_THREADS       128
#define MOE_GROUP_THREADS MOE_THREADS
/* moe_matmul's tiles: MOE_BM sorted positions of one group by MOE_BN output columns, MOE_BK
 * along K per shared-memory stage; a thread accumulates MOE_TM x MOE_TN of them (MOE_TROWS
 * thread rows by 32 thread columns: MOE_BM = MOE_TROWS MOE_TM, MOE_BN = 32 MOE_TN). */
#define MOE_BM    32
#define MOE_BN    64
#define MOE_BK    16
#define MOE_TROWS (MOE_THREADS / 32)
#define MOE_TM    (MOE_BM / MOE_TROWS)
#define MOE_TN    2

/* ------------------------------------------------------------------------------------------
 * shape deduction
 * ------------------------------------------------------------------------------------------ */

/* experts (argument i): an i32 or i64 [n, k] tensor with a known shape; reports otherwise. */
static const rx_sinfo *experts_arg(rx_deduce_ctx *dc, const rx_node *call, int i) {
  const rx_sinfo *s = ops_tensor_arg(dc, call, i, "experts");
  if (!s) return NULL;
  if ((s->dtype != RX_DTYPE_I32 && s->dtype != RX_DTYPE_I64) || s->ndim != 2 || !s->shape) {
    ops_deduce_error(dc, "%s expects experts (argument %d) as i32 or i64 [n, k], got %s",
                     call->op->name, i, ops_str(dc, s));
    return NULL;
  }
  return s;
}

const rx_sinfo *ops_deduce_moe_group(rx_deduce_ctx *dc, const rx_node *call) {
  const rx_sinfo *ex = experts_arg(dc, call, 0);
  if (!ex) return NULL;
  int64_t E = ops_int_attr(call, "num_experts", 0);
  if (E < 1 || E > MOE_MAX_EXPERTS) {
    ops_deduce_error(dc, "moe_group expects num_experts= from 1 to %d, got %lld", MOE_MAX_EXPERTS,
                     (long long)E);
    return NULL;
  }
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr **d0 = ops_dims(dc, 1), **d1 = ops_dims(dc, 1);
  d0[0] = sym_expr_const(cx, E + 1);
  d1[0] = ops_prod(dc, ex->shape, 2);
  const rx_sinfo *f[2] = {ops_tensor(dc, RX_DTYPE_I32, 1, d0), ops_tensor(dc, RX_DTYPE_I32, 1, d1)};
  return rx_sinfo_tuple(dc->mod, f, 2);
}

/* A 3-D argument i of dtype dt and dims [E, N, cols]; reports otherwise. */
static bool stacked_arg(rx_deduce_ctx *dc, const rx_node *call, int i, const char *what,
                        rx_dtype dt, const rx_expr *E, const rx_expr *N, const rx_expr *cols) {
  const rx_sinfo *s = ops_tensor_arg(dc, call, i, what);
  if (!s) return false;
  if (s->dtype != dt || s->ndim != 3 || !s->shape || ops_dim_eq(dc, s->shape[0], E) != RX_TRUE ||
      ops_dim_eq(dc, s->shape[1], N) != RX_TRUE || ops_dim_eq(dc, s->shape[2], cols) != RX_TRUE) {
    ops_deduce_error(dc, "%s expects %s (argument %d) of %s[%s, %s, %s], got %s", call->op->name,
                     what, i, ir_dtype_name(dt), ops_expr_str(dc, E), ops_expr_str(dc, N),
                     ops_expr_str(dc, cols), ops_str(dc, s));
    return false;
  }
  return true;
}

/* What the two products share: x [rows, K] and the stacked weight buffers from argument 1 on. */
typedef struct moe_sig {
  const rx_sinfo *x;
  const rx_quant_info *qi; /* NULL: a float weight */
  int nb;                  /* weight buffers */
  const rx_expr *E, *N;    /* experts, output columns (F when gated) */
} moe_sig;

/* x, the scheme and the weight buffers of a product call with `tail` arguments after them;
 * false, reported, when one is wrong. */
static bool moe_weights(rx_deduce_ctx *dc, const rx_node *call, int tail, moe_sig *g) {
  const char *opn = call->op->name;
  const rx_attr *sa = ops_call_attr(call, "scheme");
  *g = (moe_sig){.nb = 1};
  rx_quant_scheme sc;
  if (sa) {
    if (sa->kind != RX_ATTR_STR || !base_quant_lookup(sa->s, &sc)) {
      rx_strbuf names = {0};
      base_quant_names(&names);
      ops_deduce_error(dc, "%s expects scheme= one of %s, got %s", opn, names.data,
                       sa->kind == RX_ATTR_STR ? sa->s : "a non-string");
      base_strbuf_free(&names);
      return false;
    }
    g->qi = base_quant_info_of(sc);
    g->nb = base_quant_nbuffers(sc);
  }
  if (call->nargs != 1 + g->nb + tail) {
    ops_deduce_error(dc, "%s expects %d arguments (x, %d weight buffer%s and %d more), got %d", opn,
                     1 + g->nb + tail, g->nb, g->nb > 1 ? "s" : "", tail, call->nargs);
    return false;
  }
  g->x = ops_tensor_arg(dc, call, 0, "x");
  const rx_sinfo *w = g->x ? ops_tensor_arg(dc, call, 1, "w") : NULL;
  if (!w) return false;
  if (!ir_dtype_is_float(g->x->dtype) || g->x->ndim != 2 || !g->x->shape) {
    ops_deduce_error(dc, "%s expects x as a float [rows, K], got %s", opn, ops_str(dc, g->x));
    return false;
  }
  if (w->ndim != 3 || !w->shape || (!g->qi && !ir_dtype_is_float(w->dtype))) {
    ops_deduce_error(dc, "%s expects w as [E, N, K] (experts stacked)%s, got %s", opn,
                     g->qi ? " of the scheme's buffers" : " of a float dtype", ops_str(dc, w));
    return false;
  }
  rx_expr_ctx *cx = ops_ctx(dc);
  const rx_expr *K = g->x->shape[1], *zero = sym_expr_const(cx, 0);
  g->E = w->shape[0];
  const rx_expr *rows = w->shape[1];
  if (!g->qi) {
    if (!stacked_arg(dc, call, 1, "w", w->dtype, g->E, rows, K)) return false;
  } else {
    const rx_quant_info *qi = g->qi;
    const rx_expr *blk = sym_expr_const(cx, qi->block);
    if (ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_EQ, sym_expr_floormod(cx, K, blk), zero)) !=
        RX_TRUE) {
      ops_deduce_error(dc, "%s with scheme \"%s\" needs K (%s) a provable multiple of %d", opn,
                       qi->name, ops_expr_str(dc, K), qi->block);
      return false;
    }
    const rx_expr *blocks = sym_expr_floordiv(cx, K, blk);
    bool ok;
    if (qi->kind == RX_QUANT_GGUF)
      ok = stacked_arg(dc, call, 1, "w", RX_DTYPE_U8, g->E, rows,
                       sym_expr_mul(cx, blocks, sym_expr_const(cx, qi->block_bytes)));
    else if (qi->kind == RX_QUANT_INT8)
      ok = stacked_arg(dc, call, 1, "w", RX_DTYPE_I8, g->E, rows, K);
    else
      ok = stacked_arg(dc, call, 1, "w", RX_DTYPE_U8, g->E, rows,
                       sym_expr_floordiv(cx, K, sym_expr_const(cx, 2)));
    if (ok && g->nb >= 2) ok = stacked_arg(dc, call, 2, "s", RX_DTYPE_F16, g->E, rows, blocks);
    if (ok && g->nb >= 3) ok = stacked_arg(dc, call, 3, "z", RX_DTYPE_U8, g->E, rows, blocks);
    if (!ok) return false;
  }
  g->N = rows;
  if (ops_int_attr(call, "gated", 0)) {
    const rx_expr *two = sym_expr_const(cx, 2);
    if (ops_prove(dc, sym_expr_cmp(cx, RX_EXPR_EQ, sym_expr_floormod(cx, rows, two), zero)) !=
        RX_TRUE) {
      ops_deduce_error(dc, "%s gated=true expects w's rows (%s) as 2F (gate, then up): even", opn,
                       ops_expr_str(dc, rows));
      return false;
    }
    g->N = ops_simplify(dc, sym_expr_floordiv(cx, rows, two));
  }
  return true;
}

/* y [rows, N] of x's dtype. */
static const rx_sinfo *moe_out(rx_deduce_ctx *dc, const moe_sig *g, const rx_expr *rows) {
  const rx_expr **dims = ops_dims(dc, 2);
  dims[0] = rows;
  dims[1] = g->N;
  return ops_tensor(dc, g->x->dtype, 2, dims);
}

/* x's rows against the (token, slot) pairs nk: n k when gathered, else a token count that divides
 * nk into k slots; false, reported, when provably otherwise. */
static bool check_x_rows(rx_deduce_ctx *dc, const rx_node *call, const moe_sig *g,
                         const rx_expr *nk, const rx_expr *tokens) {
  bool gathered = ops_int_attr(call, "gathered", 0) != 0;
  const rx_expr *want = gathered ? nk : tokens;
  if (ops_dim_eq(dc, g->x->shape[0], want) == RX_FALSE) {
    ops_deduce_error(dc, "%s expects x with %s rows (%s), got %s", call->op->name,
                     gathered ? "a row per (token, slot) pair: n k" : "a row per token: n",
                     ops_expr_str(dc, want), ops_str(dc, g->x));
    return false;
  }
  return true;
}

const rx_sinfo *ops_deduce_moe_matmul(rx_deduce_ctx *dc, const rx_node *call) {
  moe_sig g;
  if (!moe_weights(dc, call, 2, &g)) return NULL;
  int ia = 1 + g.nb;
  const rx_sinfo *ip = ops_tensor_arg(dc, call, ia, "indptr");
  const rx_sinfo *od = ip ? ops_tensor_arg(dc, call, ia + 1, "order") : NULL;
  if (!od) return NULL;
  rx_expr_ctx *cx = ops_ctx(dc);
  if (ip->dtype != RX_DTYPE_I32 || ip->ndim != 1 || !ip->shape ||
      ops_dim_eq(dc, ip->shape[0], sym_expr_add(cx, g.E, sym_expr_const(cx, 1))) != RX_TRUE) {
    ops_deduce_error(
        dc, "moe_matmul expects indptr (argument %d) as i32[E + 1] = i32[%s], got %s", ia,
        ops_expr_str(dc, ops_simplify(dc, sym_expr_add(cx, g.E, sym_expr_const(cx, 1)))),
        ops_str(dc, ip));
    return NULL;
  }
  if (od->dtype != RX_DTYPE_I32 || od->ndim != 1 || !od->shape) {
    ops_deduce_error(dc, "moe_matmul expects order (argument %d) as i32[n k], got %s", ia + 1,
                     ops_str(dc, od));
    return NULL;
  }
  int64_t k = ops_int_attr(call, "top_k", 0);
  if (k < 1) {
    ops_deduce_error(dc, "moe_matmul expects top_k= >= 1, got %lld", (long long)k);
    return NULL;
  }
  const rx_expr *nk = od->shape[0];
  const rx_expr *tokens = ops_simplify(dc, sym_expr_floordiv(cx, nk, sym_expr_const(cx, k)));
  if (!check_x_rows(dc, call, &g, nk, tokens)) return NULL;
  return moe_out(dc, &g, nk);
}

const rx_sinfo *ops_deduce_moe_gemv(rx_deduce_ctx *dc, const rx_node *call) {
  moe_sig g;
  if (!moe_weights(dc, call, 1, &g)) return NULL;
  const rx_sinfo *ex = experts_arg(dc, call, 1 + g.nb);
  if (!ex) return NULL;
  const rx_expr *nk = ops_prod(dc, ex->shape, 2);
  if (!check_x_rows(dc, call, &g, nk, ex->shape[0])) return NULL;
  return moe_out(dc, &g, nk);
}

/* ------------------------------------------------------------------------------------------
 * legalization
 * ------------------------------------------------------------------------------------------ */

/* The message of the run-time check of an expert id (JSON string literal text). */
static const char *id_message(lz_ctx *l, int64_t E) {
  rx_strbuf msg = {0}, lit = {0};
  if (l->site) l->site_used = true;
  base_strbuf_printf(&msg, "%s: expert id %%v is outside 0 .. %lld", l->site ? l->site : "moe",
                     (long long)(E - 1));
  base_strbuf_json_string(&lit, msg.data);
  const char *r = lz_str(l, "%s", lit.data);
  base_strbuf_free(&msg);
  base_strbuf_free(&lit);
  return r;
}

/* `let id: i64 = experts[t, s]`, checked against 0 .. E - 1 and clamped into it (a failed check
 * fails the call; the clamp keeps the reads inside w meanwhile); returns the local's name. */
static const char *expert_id(lz_ctx *l, const lz_opnd *ex, const char *t, const char *s,
                             const rx_expr *E, int64_t Ec) {
  const char *idx[2] = {t, s}, *v = lz_fresh(l, "eid"), *id = lz_fresh(l, "id");
  lz_line(l, "let %s: i64 = i64(%s)", v, lz_load(l, ex, idx));
  const char *hi = lz_ex(l, E);
  if (Ec > 0)
    lz_line(l, "let %s: i64 = min(max(check(%s >= 0 && %s < %s, %s, %s), 0), %s - 1)", id, v, v, hi,
            v, id_message(l, Ec), hi);
  else
    lz_line(l, "let %s: i64 = min(max(%s, 0), %s - 1)", id, v, hi);
  return id;
}

/* moe_group: a counting sort in one block of MOE_GROUP_THREADS threads, thread t owning the
 * pairs t C .. t C + C - 1 (C = ceil(n k / threads)); per expert e in turn: each thread counts
 * its pairs of expert e, an inclusive scan of the counts in shared memory (log2(threads) steps)
 * gives each thread where its pairs of e go, after base (the pairs of the experts before e),
 * and each thread writes them there in order (stable); indptr[e] = base.
 *
 *   for e in 0..E {
 *     cnt[0] = #{my pairs of e}   sc[t] = cnt[0]   barrier   (inclusive scan of sc)
 *     pos = base + sc[t] - cnt[0]   for my pairs p of e, in order { order[pos++] = p }
 *     indptr[e] = base (thread 0)   base = base + sc[threads - 1]   barrier
 *   }
 *   indptr[E] = base (thread 0)
 *
 * 2 E C steps per thread, no atomics, deterministic: for prefill's n k = 8192 pairs and E = 8,
 * 512 steps. Any n k; E up to MOE_MAX_EXPERTS (the loop over experts is serial). */
static void group_pass(lz_ctx *l, const lz_opnd *ex, const char *tx, const char *C, const char *NK,
                       const char *e, const rx_expr *E, int64_t Ec, bool write, const lz_opnd *od,
                       const char *cnt) {
  const char *q = lz_loopvar(l, "q"), *p = lz_fresh(l, "p");
  lz_line(l, "for %s in 0..%s {", q, C);
  l->ind++;
  lz_line(l, "let %s: i64 = %s * %s + %s", p, tx, C, q);
  lz_line(l, "if %s < %s {", p, NK);
  l->ind++;
  const rx_expr *k = ex->shape[1];
  const char *t = p, *s = "0";
  if (k->kind != RX_EXPR_CONST || k->value != 1) {
    t = lz_str(l, "%s // %s", p, lz_ex(l, k));
    s = lz_str(l, "%s %% %s", p, lz_ex(l, k));
  }
  const char *id = expert_id(l, ex, t, s, E, write ? 0 : Ec);
  if (!write) {
    lz_line(l, "%s[0] = select(%s == %s, %s[0] + 1, %s[0])", cnt, id, e, cnt, cnt);
  } else {
    lz_line(l, "if %s == %s {", id, e);
    l->ind++;
    const char *at = lz_str(l, "i64(%s[0])", cnt);
    lz_line(l, "%s = i32(%s)", lz_load(l, od, &at), p);
    lz_line(l, "%s[0] = %s[0] + 1", cnt, cnt);
    lz_close(l);
  }
  lz_close_n(l, 2);
}

void lz_gen_moe_group(lz_ctx *l) {
  lz_opnd *ex = lz_arg(l, 0), *ip = &l->outs[0], *od = &l->outs[1];
  if (ex->scalar || !ex->shape || l->nouts != 2) {
    lz_fail(l, "moe_group expects experts [n, k] and gives two results");
    return;
  }
  int64_t Ec = ops_int_attr(l->call, "num_experts", 0);
  rx_expr_ctx *cx = l->cx;
  const rx_expr *E = sym_expr_const(cx, Ec), *nk = od->shape[0];
  const int T = MOE_GROUP_THREADS;
  const char *NK = lz_ex(l, nk);
  const char *C = lz_ex(l, sym_expr_floordiv(cx, sym_expr_add(cx, nk, sym_expr_const(cx, T - 1)),
                                             sym_expr_const(cx, T)));
  const char *bx = lz_loopvar(l, "bx"), *tx = lz_loopvar(l, "tx"), *e = lz_loopvar(l, "e");
  const char *sc = lz_fresh(l, "sc"), *base = lz_fresh(l, "base"), *cnt = lz_fresh(l, "cnt");
  const char *v = lz_fresh(l, "v"), *pos = lz_fresh(l, "pos");
  lz_line(l, "for %s in 0..1 bind(blockIdx.x) {", bx);
  l->ind++;
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", tx, T);
  l->ind++;
  lz_line(l, "alloc %s: i32[%d] shared", sc, T);
  lz_line(l, "alloc %s: i32[1] local", base);
  lz_line(l, "alloc %s: i32[1] local", cnt);
  lz_line(l, "alloc %s: i32[1] local", v);
  lz_line(l, "%s[0] = 0", base);
  lz_line(l, "for %s in 0..%lld {", e, (long long)Ec);
  l->ind++;
  lz_line(l, "%s[0] = 0", cnt);
  group_pass(l, ex, tx, C, NK, e, E, Ec, false, od, cnt);
  lz_line(l, "%s[%s] = %s[0]", sc, tx, cnt);
  lz_line(l, "barrier");
  for (int off = 1; off < T; off *= 2) {
    lz_line(l, "%s[0] = %s[%s] + select(%s >= %d, %s[max(%s - %d, 0)], 0)", v, sc, tx, tx, off, sc,
            tx, off);
    lz_line(l, "barrier");
    lz_line(l, "%s[%s] = %s[0]", sc, tx, v);
    lz_line(l, "barrier");
  }
  lz_line(l, "let %s: i32 = %s[0] + %s[%s] - %s[0]", pos, base, sc, tx, cnt);
  lz_line(l, "%s[0] = %s", cnt, pos);
  group_pass(l, ex, tx, C, NK, e, E, Ec, true, od, cnt);
  lz_line(l, "if %s == 0 { %s = %s[0] }", tx, lz_load(l, ip, &e), base);
  lz_line(l, "%s[0] = %s[0] + %s[%d]", base, base, sc, T - 1);
  lz_line(l, "barrier");
  lz_close(l);
  const char *last = lz_str(l, "%lld", (long long)Ec);
  lz_line(l, "if %s == 0 { %s = %s[0] }", tx, lz_load(l, ip, &last), base);
  lz_close_n(l, 2);
}

/* What the product generators share. */
typedef struct moe_gen {
  lz_ctx *l;
  lz_opnd *x, *y;
  const rx_quant_info *qi;
  const char *w, *s, *z; /* weight buffers */
  const rx_expr *F;      /* output columns (gated: the offset of the up rows) */
  bool gated;
} moe_gen;

static bool moe_gen_open(lz_ctx *l, moe_gen *g) {
  *g = (moe_gen){.l = l, .x = lz_arg(l, 0), .y = &l->outs[0]};
  const rx_attr *sa = ops_call_attr(l->call, "scheme");
  int nb = 1;
  if (sa) {
    rx_quant_scheme sc;
    if (!base_quant_lookup(sa->s, &sc)) {
      lz_fail(l, "unknown scheme");
      return false;
    }
    g->qi = base_quant_info_of(sc);
    nb = base_quant_nbuffers(sc);
  }
  g->w = lz_arg(l, 1)->name;
  g->s = nb >= 2 ? lz_arg(l, 2)->name : NULL;
  g->z = nb >= 3 ? lz_arg(l, 3)->name : NULL;
  g->gated = ops_int_attr(l->call, "gated", 0) != 0;
  g->F = g->y->shape[1];
  return true;
}

/* An f32 accumulator for moe_dot (allocated before the reduces: the matmul rule's form, matmul.h,
 * has its allocs ahead of its reductions). */
static const char *moe_acc(moe_gen *g) {
  const char *acc = lz_fresh(g->l, "acc");
  lz_line(g->l, "alloc %s: f32[1] local", acc);
  return acc;
}

/* acc = sum_r x[row, r] w[e, col, r] (its reduce); returns acc. */
static const char *moe_dot(moe_gen *g, const char *acc, const char *row, const char *e,
                           const char *col) {
  lz_ctx *l = g->l;
  const char *r = lz_loopvar(l, "r");
  lz_line(l, "reduce %s in 0..%s {", r, lz_ex(l, g->x->shape[1]));
  l->ind++;
  lz_line(l, "init { %s[0] = 0.0 }", acc);
  lz_line(l, "update {");
  l->ind++;
  const char *xi[2] = {row, r}, *wv;
  if (g->qi) {
    wv = lz_quant_element(l, g->qi, g->w, g->s, g->z, lz_str(l, "%s, %s", e, col), r);
  } else {
    lz_opnd *w = lz_arg(l, 1);
    const char *wi[3] = {e, col, r};
    wv = lz_up(l, w->dtype, lz_load(l, w, wi));
  }
  lz_line(l, "%s[0] = %s[0] + %s * %s", acc, acc, lz_up(l, g->x->dtype, lz_load(l, g->x, xi)), wv);
  lz_close_n(l, 2);
  return acc;
}

/* The output point y[p, c] = x[row] w[e, c]^T, or gated silu(gate) * up of rows c and F + c. */
static void moe_point(moe_gen *g, const char *row, const char *e, const char *p, const char *c) {
  lz_ctx *l = g->l;
  rx_dtype t = g->y->dtype;
  const char *tn = ir_dtype_name(t), *yi[2] = {p, c}, *out = lz_load(l, g->y, yi);
  const char *a = moe_acc(g), *b = g->gated ? moe_acc(g) : NULL;
  moe_dot(g, a, row, e, c);
  if (!g->gated) {
    lz_line(l, "%s = %s(%s[0])", out, tn, a);
    return;
  }
  moe_dot(g, b, row, e, lz_str(l, "%s + %s", lz_ex(l, g->F), c));
  const char *gv = lz_fresh(l, "g"), *uv = lz_fresh(l, "u");
  lz_line(l, "let %s: f32 = %s", gv, lz_up(l, t, lz_str(l, "%s(%s[0])", tn, a)));
  lz_line(l, "let %s: f32 = %s", uv, lz_up(l, t, lz_str(l, "%s(%s[0])", tn, b)));
  lz_line(l, "%s = %s(%s * %s)", out, tn,
          lz_up(l, t, lz_str(l, "%s(%s * sigmoid(%s))", tn, gv, gv)), uv);
}

/* The element of w's expert e at row `row` and column `col` (index texts, in range) as f32. */
static const char *moe_wload(moe_gen *g, const char *e, const char *row, const char *col) {
  lz_ctx *l = g->l;
  if (g->qi) return lz_quant_element(l, g->qi, g->w, g->s, g->z, lz_str(l, "%s, %s", e, row), col);
  lz_opnd *w = lz_arg(l, 1);
  const char *wi[3] = {e, row, col};
  return lz_up(l, w->dtype, lz_load(l, w, wi));
}

/* What the two forms of moe_matmul's block share: the operands and the names the block uses. */
typedef struct moe_mm {
  moe_gen g;
  lz_opnd *ip, *od;
  int64_t k;
  bool gathered, frag; /* frag: the matrix-unit form (16x16x16 fragments, T operands) */
  int sets;            /* weight tiles: 2 when gated */
  const char *NK, *Ft, *Kt, *bm, *bn, *tx, *e, *lo, *hi, *tr, *tc;
  const char *xs, *ws[2], *acc[2], *ys[2], *fc[2][2], *fa, *fb;
} moe_mm;

/* The block's group: e, and its rows lo .. hi - 1 of the sorted positions (none: lo = hi = 0),
 * by a scan of indptr that counts each group's row tiles. */
static void mm_find_group(moe_mm *mm, const rx_expr *E) {
  lz_ctx *l = mm->g.l;
  const char *gi = lz_fresh(l, "gi"), *cum = lz_fresh(l, "cum"), *q = lz_loopvar(l, "q");
  const char *a = lz_fresh(l, "a"), *b = lz_fresh(l, "b"), *nt = lz_fresh(l, "nt");
  const char *hit = lz_fresh(l, "hit"), *at = lz_fresh(l, "at");
  lz_line(l, "alloc %s: i64[3] local", gi);
  lz_line(l, "alloc %s: i64[1] local", cum);
  for (int i = 0; i < 3; i++) lz_line(l, "%s[%d] = 0", gi, i);
  lz_line(l, "%s[0] = 0", cum);
  lz_line(l, "for %s in 0..%s {", q, lz_ex(l, E));
  l->ind++;
  lz_line(l, "let %s: i64 = min(max(i64(%s[%s]), 0), %s)", a, mm->ip->name, q, mm->NK);
  lz_line(l, "let %s: i64 = min(max(i64(%s[%s + 1]), %s), %s)", b, mm->ip->name, q, a, mm->NK);
  lz_line(l, "let %s: i64 = (%s - %s + %d) // %d", nt, b, a, MOE_BM - 1, MOE_BM);
  lz_line(l, "let %s: bool = %s >= %s[0] && %s < %s[0] + %s", hit, mm->bm, cum, mm->bm, cum, nt);
  lz_line(l, "let %s: i64 = %s + (%s - %s[0]) * %d", at, a, mm->bm, cum, MOE_BM);
  lz_line(l, "%s[0] = select(%s, %s, %s[0])", gi, hit, q, gi);
  lz_line(l, "%s[1] = select(%s, %s, %s[1])", gi, hit, at, gi);
  lz_line(l, "%s[2] = select(%s, min(%s, %s + %d), %s[2])", gi, hit, b, at, MOE_BM, gi);
  lz_line(l, "%s[0] = %s[0] + %s", cum, cum, nt);
  lz_close(l);
  mm->e = lz_fresh(l, "e");
  mm->lo = lz_fresh(l, "lo");
  mm->hi = lz_fresh(l, "hi");
  lz_line(l, "let %s: i64 = %s[0]", mm->e, gi);
  lz_line(l, "let %s: i64 = %s[1]", mm->lo, gi);
  lz_line(l, "let %s: i64 = %s[2]", mm->hi, gi);
}

/* One step k0 of MOE_BK along K: x's rows of the tile (gathered through order) and the expert's
 * weight rows into shared memory, MOE_THREADS elements at a time, 16 lanes along k, zero past
 * the rows, the columns and K; f32, or T in the matrix-unit form. */
static void mm_stage(moe_mm *mm, const char *k0) {
  lz_ctx *l = mm->g.l;
  const char *u = lz_loopvar(l, "u"), *id = lz_fresh(l, "id"), *kc = lz_fresh(l, "kc");
  const char *j = lz_fresh(l, "j"), *p = lz_fresh(l, "p"), *kq = lz_fresh(l, "kq");
  const char *st = mm->frag ? ir_dtype_name(mm->g.x->dtype) : "f32";
  lz_line(l, "for %s in 0..%d unroll {", u, MOE_BM * MOE_BK / MOE_THREADS);
  l->ind++;
  lz_line(l, "let %s: i64 = %s + %s * %d", id, mm->tx, u, MOE_THREADS);
  lz_line(l, "let %s: i64 = %s * %d + %s %% %d", kc, k0, MOE_BK, id, MOE_BK);
  lz_line(l, "let %s: i64 = %s + %s // %d", j, mm->lo, id, MOE_BK);
  lz_line(l, "let %s: i64 = min(max(i64(%s[min(%s, %s - 1)]), 0), %s - 1)", p, mm->od->name, j,
          mm->NK, mm->NK);
  lz_line(l, "let %s: i64 = min(%s, %s - 1)", kq, kc, mm->Kt);
  const char *xi[2] = {mm->gathered ? p : lz_str(l, "%s // %lld", p, (long long)mm->k), kq};
  lz_line(l, "%s[%s // %d, %s %% %d] = %s(select(%s < %s && %s < %s, %s, 0.0))", mm->xs, id, MOE_BK,
          id, MOE_BK, st, j, mm->hi, kc, mm->Kt, lz_up(l, mm->g.x->dtype, lz_load(l, mm->g.x, xi)));
  lz_close(l);
  for (int s = 0; s < mm->sets; s++) {
    const char *c = lz_fresh(l, "c"), *cq = lz_fresh(l, "cq");
    lz_line(l, "for %s in 0..%d unroll {", u, MOE_BN * MOE_BK / MOE_THREADS);
    l->ind++;
    lz_line(l, "let %s: i64 = %s + %s * %d", id, mm->tx, u, MOE_THREADS);
    lz_line(l, "let %s: i64 = %s * %d + %s %% %d", kc, k0, MOE_BK, id, MOE_BK);
    lz_line(l, "let %s: i64 = %s * %d + %s // %d", c, mm->bn, MOE_BN, id, MOE_BK);
    lz_line(l, "let %s: i64 = min(%s, %s - 1)%s", cq, c, mm->Ft,
            s ? lz_str(l, " + %s", mm->Ft) : "");
    lz_line(l, "let %s: i64 = min(%s, %s - 1)", kq, kc, mm->Kt);
    const char *wv = moe_wload(&mm->g, mm->e, cq, kq);
    lz_line(l, "%s[%s // %d, %s %% %d] = %s(select(%s < %s && %s < %s, %s, 0.0))", mm->ws[s], id,
            MOE_BK, id, MOE_BK, st, c, mm->Ft, kc, mm->Kt, wv);
    lz_close(l);
  }
}

/* The products of one step: per thread MOE_TM x MOE_TN f32 sums over the staged k; or, in the
 * matrix-unit form, per subgroup w (MOE_THREADS / 32 = 4 of them) the 16 rows (w // 2) 16 by two
 * 16-column fragments from (w % 2) 32 of the 32 x 64 tile. */
static void mm_multiply(moe_mm *mm) {
  lz_ctx *l = mm->g.l;
  if (mm->frag) {
    lz_line(l, "frag load %s, %s[%s // 64 * 16, 0], %d", mm->fa, mm->xs, mm->tx, MOE_BK);
    for (int s = 0; s < mm->sets; s++)
      for (int h = 0; h < 2; h++) {
        lz_line(l, "frag load %s, %s[%s // 32 %% 2 * 32 + %d, 0], %d, col_major", mm->fb, mm->ws[s],
                mm->tx, h * 16, MOE_BK);
        lz_line(l, "frag mma %s, %s, %s, %s", mm->fc[s][h], mm->fa, mm->fb, mm->fc[s][h]);
      }
    return;
  }
  const char *kk = lz_loopvar(l, "kk"), *i = lz_loopvar(l, "i"), *jj = lz_loopvar(l, "jj");
  lz_line(l, "for %s in 0..%d unroll {", kk, MOE_BK);
  l->ind++;
  lz_line(l, "for %s in 0..%d unroll {", i, MOE_TM);
  l->ind++;
  lz_line(l, "for %s in 0..%d unroll {", jj, MOE_TN);
  l->ind++;
  for (int s = 0; s < mm->sets; s++)
    lz_line(l, "%s[%s * %d + %s] = %s[%s * %d + %s] + %s[%s + %s * %d, %s] * %s[%s + %s * 32, %s]",
            mm->acc[s], i, MOE_TN, jj, mm->acc[s], i, MOE_TN, jj, mm->xs, mm->tr, i, MOE_TROWS, kk,
            mm->ws[s], mm->tc, jj, kk);
  lz_close_n(l, 3);
}

/* The epilogue: row lo + tr + 4 i of the tile to y[order[..]], columns bn BN + tc + 32 jj (a
 * subgroup's lanes: consecutive columns), the sums from the accumulators or, in the matrix-unit
 * form, from the fragments stored to shared memory. */
static void mm_epilogue(moe_mm *mm) {
  lz_ctx *l = mm->g.l;
  const char *i = lz_loopvar(l, "i"), *jj = lz_loopvar(l, "jj");
  if (mm->frag) {
    for (int s = 0; s < mm->sets; s++)
      for (int h = 0; h < 2; h++)
        lz_line(l, "frag store %s, %s[%s // 64 * 16, %s // 32 %% 2 * 32 + %d], %d", mm->fc[s][h],
                mm->ys[s], mm->tx, mm->tx, h * 16, MOE_BN);
    lz_line(l, "barrier");
  }
  lz_line(l, "for %s in 0..%d unroll {", i, MOE_TM);
  l->ind++;
  lz_line(l, "for %s in 0..%d unroll {", jj, MOE_TN);
  l->ind++;
  const char *j = lz_fresh(l, "j"), *c = lz_fresh(l, "c"), *p = lz_fresh(l, "p");
  lz_line(l, "let %s: i64 = %s + %s * %d", j, mm->tr, i, MOE_TROWS);
  lz_line(l, "let %s: i64 = %s + %s * 32", c, mm->tc, jj);
  lz_line(l, "if %s + %s < %s && %s * %d + %s < %s {", mm->lo, j, mm->hi, mm->bn, MOE_BN, c,
          mm->Ft);
  l->ind++;
  lz_line(l, "let %s: i64 = min(max(i64(%s[%s + %s]), 0), %s - 1)", p, mm->od->name, mm->lo, j,
          mm->NK);
  const char *v[2];
  for (int s = 0; s < mm->sets; s++)
    v[s] = mm->frag ? lz_str(l, "%s[%s, %s]", mm->ys[s], j, c)
                    : lz_str(l, "%s[%s * %d + %s]", mm->acc[s], i, MOE_TN, jj);
  rx_dtype t = mm->g.y->dtype;
  const char *tn = ir_dtype_name(t), *yi[2] = {p, lz_str(l, "%s * %d + %s", mm->bn, MOE_BN, c)};
  const char *out = lz_load(l, mm->g.y, yi);
  if (!mm->g.gated) {
    lz_line(l, "%s = %s(%s)", out, tn, v[0]);
  } else {
    const char *gv = lz_fresh(l, "g"), *uv = lz_fresh(l, "uv");
    lz_line(l, "let %s: f32 = %s", gv, lz_up(l, t, lz_str(l, "%s(%s)", tn, v[0])));
    lz_line(l, "let %s: f32 = %s", uv, lz_up(l, t, lz_str(l, "%s(%s)", tn, v[1])));
    lz_line(l, "%s = %s(%s * %s)", out, tn,
            lz_up(l, t, lz_str(l, "%s(%s * sigmoid(%s))", tn, gv, gv)), uv);
  }
  lz_close_n(l, 3);
}

/* One form of the grouped GEMM's kernel (lz_gen_moe_matmul). */
static void mm_kernel(moe_mm *mm, const rx_expr *E) {
  lz_ctx *l = mm->g.l;
  rx_expr_ctx *cx = l->cx;
  const rx_expr *nk = mm->od->shape[0], *K = mm->g.x->shape[1];
  const rx_expr *tiles =
      sym_expr_add(cx,
                   sym_expr_floordiv(cx, sym_expr_add(cx, nk, sym_expr_const(cx, MOE_BM - 1)),
                                     sym_expr_const(cx, MOE_BM)),
                   E);
  const rx_expr *ntiles = sym_expr_floordiv(
      cx, sym_expr_add(cx, mm->g.F, sym_expr_const(cx, MOE_BN - 1)), sym_expr_const(cx, MOE_BN));
  mm->bm = lz_loopvar(l, "bm");
  mm->bn = lz_loopvar(l, "bn");
  mm->tx = lz_loopvar(l, "tx");
  lz_line(l, "for %s in 0..%s bind(blockIdx.x) {", mm->bm, lz_ex(l, tiles));
  l->ind++;
  lz_line(l, "for %s in 0..%s bind(blockIdx.y) {", mm->bn, lz_ex(l, ntiles));
  l->ind++;
  lz_line(l, "for %s in 0..%d bind(threadIdx.x) {", mm->tx, MOE_THREADS);
  l->ind++;
  mm_find_group(mm, E);
  mm->tr = lz_fresh(l, "tr");
  mm->tc = lz_fresh(l, "tc");
  lz_line(l, "let %s: i64 = %s // 32", mm->tr, mm->tx);
  lz_line(l, "let %s: i64 = %s %% 32", mm->tc, mm->tx);
  const char *T = ir_dtype_name(mm->g.x->dtype), *st = mm->frag ? T : "f32";
  int pad = mm->frag ? 0 : 1; /* the SIMT form's reads of w across lanes: a stride of 17 */
  mm->xs = lz_fresh(l, "xs");
  lz_line(l, "alloc %s: %s[%d, %d] shared", mm->xs, st, MOE_BM, MOE_BK + pad);
  if (mm->frag) {
    mm->fa = lz_fresh(l, "fa");
    mm->fb = lz_fresh(l, "fb");
    lz_line(l, "alloc %s: %s[16, 16] fragment a", mm->fa, T);
    lz_line(l, "alloc %s: %s[16, 16] fragment b", mm->fb, T);
  }
  for (int s = 0; s < mm->sets; s++) {
    mm->ws[s] = lz_fresh(l, "ws");
    lz_line(l, "alloc %s: %s[%d, %d] shared", mm->ws[s], st, MOE_BN, MOE_BK + pad);
    if (mm->frag) {
      mm->ys[s] = lz_fresh(l, "ys");
      lz_line(l, "alloc %s: f32[%d, %d] shared", mm->ys[s], MOE_BM, MOE_BN);
      for (int h = 0; h < 2; h++) {
        mm->fc[s][h] = lz_fresh(l, "fc");
        lz_line(l, "alloc %s: f32[16, 16] fragment acc", mm->fc[s][h]);
        lz_line(l, "frag fill %s, 0.0", mm->fc[s][h]);
      }
    } else {
      const char *u = lz_loopvar(l, "u");
      mm->acc[s] = lz_fresh(l, "acc");
      lz_line(l, "alloc %s: f32[%d] local", mm->acc[s], MOE_TM * MOE_TN);
      lz_line(l, "for %s in 0..%d unroll { %s[%s] = 0.0 }", u, MOE_TM * MOE_TN, mm->acc[s], u);
    }
  }
  const char *k0 = lz_loopvar(l, "k0");
  lz_line(l, "for %s in 0..%s {", k0,
          lz_ex(l, sym_expr_floordiv(cx, sym_expr_add(cx, K, sym_expr_const(cx, MOE_BK - 1)),
                                     sym_expr_const(cx, MOE_BK))));
  l->ind++;
  lz_line(l, "barrier");
  mm_stage(mm, k0);
  lz_line(l, "barrier");
  mm_multiply(mm);
  lz_close(l);
  mm_epilogue(mm);
  lz_close_n(l, 3);
}

/* moe_matmul: the grouped GEMM as tiles of MOE_BM sorted positions of one group by MOE_BN output
 * columns, a block of MOE_THREADS threads each (issue 32's grid): blockIdx.x walks the row tiles
 * of the groups one after the other, sum_e ceil(cnt_e / BM) <= ceil(n k / BM) + E of them, so the
 * grid is known from n k and E; a block finds its group and row range by a scan of indptr (E
 * steps, every thread alike), blocks past the last tile have no rows. Per step of MOE_BK along
 * K, the block stages x's rows of the tile (gathered through order: row order[j] // k, or
 * order[j]) and the expert's weight rows (dequantized where a scheme says) in shared memory, and
 * the epilogue scatters row j of the tile to y[order[j]] (gated: a second weight tile, rows
 * F + c, and the SwiGLU). Two forms of the products:
 *   - f16 and bf16 x where the target runs 16x16x16 fragments (`if has_fragments`: CUDA's
 *     mma.sync, vulkan-nvidia's cooperative matrices): the tiles staged as T, each subgroup a
 *     16 x 32 part of the tile in two f32 accumulator fragments, stored to shared memory for the
 *     epilogue;
 *   - elsewhere (and for f32 x) the tiles staged as f32, each thread MOE_TM x MOE_TN sums (rows
 *     tr + 4 i, columns tc + 32 jj: a subgroup's lanes share the row and take consecutive
 *     columns, so the stores are coalesced and the padded reads of w conflict-free). */
void lz_gen_moe_matmul(lz_ctx *l) {
  moe_mm mm = {0};
  if (!moe_gen_open(l, &mm.g)) return;
  int nb = l->call->nargs - 3;
  mm.ip = lz_arg(l, 1 + nb);
  mm.od = lz_arg(l, 2 + nb);
  mm.k = ops_int_attr(l->call, "top_k", 1);
  mm.gathered = ops_int_attr(l->call, "gathered", 0) != 0;
  mm.sets = mm.g.gated ? 2 : 1;
  mm.NK = lz_ex(l, mm.od->shape[0]);
  mm.Ft = lz_ex(l, mm.g.F);
  mm.Kt = lz_ex(l, mm.g.x->shape[1]);
  const rx_expr *E = sym_expr_sub(l->cx, mm.ip->shape[0], sym_expr_const(l->cx, 1));
  rx_dtype t = mm.g.x->dtype;
  if (t != RX_DTYPE_F16 && t != RX_DTYPE_BF16) {
    mm_kernel(&mm, E);
    return;
  }
  lz_line(l, "if has_fragments(%s, f32, 16, 16, 16) {", ir_dtype_name(t));
  l->ind++;
  mm.frag = true;
  mm_kernel(&mm, E);
  l->ind--;
  lz_line(l, "} else {");
  l->ind++;
  mm.frag = false;
  mm_kernel(&mm, E);
  lz_close(l);
}

/* moe_gemv: a thread per (pair i = t k + s, column c), reading experts[t, s]'s rows only:
 *
 *   for i in 0..n k, c in 0..N {
 *     let e = checked experts[i // k, i % k]
 *     y[i, c] = x[i // k or i] . w[e, c]     (gated: the SwiGLU of rows c and F + c)
 *   } */
void lz_gen_moe_gemv(lz_ctx *l) {
  moe_gen g;
  if (!moe_gen_open(l, &g)) return;
  int nb = l->call->nargs - 2;
  lz_opnd *ex = lz_arg(l, 1 + nb);
  bool gathered = ops_int_attr(l->call, "gathered", 0) != 0;
  lz_opnd *w = lz_arg(l, 1);
  const rx_expr *E = w->shape[0];
  const char *i = lz_loopvar(l, "i"), *c = lz_loopvar(l, "c");
  lz_line(l, "for %s in 0..%s, %s in 0..%s {", i, lz_ex(l, g.y->shape[0]), c, lz_ex(l, g.F));
  l->ind++;
  const rx_expr *iv = sym_expr_var(l->cx, i);
  const char *tt = lz_ex(l, sym_expr_floordiv(l->cx, iv, ex->shape[1]));
  const char *ss = lz_ex(l, sym_expr_floormod(l->cx, iv, ex->shape[1]));
  int64_t Ec = E->kind == RX_EXPR_CONST ? E->value : 0;
  const char *e = expert_id(l, ex, tt, ss, E, Ec);
  moe_point(&g, gathered ? i : tt, e, i, c);
  lz_close(l);
}
