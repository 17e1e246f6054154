/* shapes/expr.c: the context, hash-consing, the structural order, linear forms and the
 * context-free canonicalizer (the public constructors and sym_expr_simplify).
 *
 * Every canonicalizing helper c_* takes canonical operands and returns a canonical node, or
 * NULL when some constant arithmetic would overflow int64; the caller (make_canon) then
 * interns the operation as given over its canonical operands, which is itself a fixed point
 * (the same overflow happens again), so simplification stays idempotent. */
#include "shapes_int.h"

#include <stdlib.h>
#include <string.h>

/* more than this many terms in the product of two sums: keep the product unexpanded */
#define EXPAND_CAP 256

/* ---- context ---- */

rx_expr_ctx *sym_expr_ctx_new(void) {
  rx_expr_ctx *ctx = base_calloc(1, sizeof *ctx);
  base_arena_init(&ctx->arena);
  base_strtab_init(&ctx->names, &ctx->arena);
  return ctx;
}

void sym_expr_ctx_free(rx_expr_ctx *ctx) {
  if (!ctx) return;
  base_strtab_free(&ctx->names);
  free(ctx->slots);
  free(ctx->canon);
  base_arena_free(&ctx->arena);
  free(ctx);
}

rx_arena *sym_expr_ctx_arena(rx_expr_ctx *ctx) { return &ctx->arena; }

const char *sym_expr_ctx_intern(rx_expr_ctx *ctx, const char *s, size_t n) {
  return base_strtab_intern(&ctx->names, s, n);
}

/* ---- hash-consing ---- */

static uint64_t node_hash(rx_expr_kind kind, int64_t value, const char *name, const rx_expr *a,
                          const rx_expr *b, const rx_expr *c) {
  uint64_t h = rx_hash_mix(0x243f6a8885a308d3ull, (uint64_t)kind);
  h = rx_hash_mix(h, (uint64_t)value);
  if (name) h = rx_hash_mix(h, base_hash_bytes(name, strlen(name)));
  h = rx_hash_mix(h, a ? a->hash : 1);
  h = rx_hash_mix(h, b ? b->hash : 2);
  h = rx_hash_mix(h, c ? c->hash : 3);
  return h;
}

static void table_grow(rx_expr_ctx *ctx) {
  size_t cap = ctx->cap ? ctx->cap * 2 : 1024;
  rx_expr **slots = base_calloc(cap, sizeof *slots);
  for (size_t i = 0; i < ctx->cap; i++) {
    rx_expr *e = ctx->slots[i];
    if (!e) continue;
    size_t j = (size_t)e->hash & (cap - 1);
    while (slots[j]) j = (j + 1) & (cap - 1);
    slots[j] = e;
  }
  free(ctx->slots);
  ctx->slots = slots;
  ctx->cap = cap;
}

/* Interns a node exactly as given. */
static const rx_expr *sym_expr_node(rx_expr_ctx *ctx, rx_expr_kind kind, int64_t value,
                                    const char *name, const rx_expr *a, const rx_expr *b,
                                    const rx_expr *c) {
  uint64_t h = node_hash(kind, value, name, a, b, c);
  if ((ctx->count + 1) * 2 > ctx->cap) table_grow(ctx);
  size_t i = (size_t)h & (ctx->cap - 1);
  for (rx_expr *e; (e = ctx->slots[i]); i = (i + 1) & (ctx->cap - 1))
    if (e->hash == h && e->kind == kind && e->value == value && e->name == name && e->a == a &&
        e->b == b && e->c == c)
      return e;
  RX_ASSERT(ctx->count < UINT32_MAX);
  rx_expr *e = base_arena_alloc(&ctx->arena, sizeof *e);
  e->kind = kind;
  e->id = (uint32_t)ctx->count;
  e->hash = h;
  e->value = value;
  e->name = name;
  e->a = a;
  e->b = b;
  e->c = c;
  ctx->slots[i] = e;
  ctx->count++;
  return e;
}

static const rx_expr *cst(rx_expr_ctx *ctx, int64_t v) {
  return sym_expr_node(ctx, RX_EXPR_CONST, v, NULL, NULL, NULL, NULL);
}
static const rx_expr *bin(rx_expr_ctx *ctx, rx_expr_kind k, const rx_expr *a, const rx_expr *b) {
  return sym_expr_node(ctx, k, 0, NULL, a, b, NULL);
}

/* the memo of canonical forms, indexed by node id */
static const rx_expr *canon_get(rx_expr_ctx *ctx, const rx_expr *e) {
  return e->id < ctx->canon_cap ? ctx->canon[e->id] : NULL;
}
static void canon_set(rx_expr_ctx *ctx, const rx_expr *e, const rx_expr *r) {
  if (e->id >= ctx->canon_cap) {
    size_t cap = ctx->canon_cap ? ctx->canon_cap : 1024;
    while (cap <= e->id) cap *= 2;
    ctx->canon = base_realloc(ctx->canon, cap * sizeof *ctx->canon);
    memset(ctx->canon + ctx->canon_cap, 0, (cap - ctx->canon_cap) * sizeof *ctx->canon);
    ctx->canon_cap = cap;
  }
  ctx->canon[e->id] = r;
}

const rx_expr *sym_expr_const(rx_expr_ctx *ctx, int64_t v) { return cst(ctx, v); }

const rx_expr *sym_expr_var(rx_expr_ctx *ctx, const char *name) {
  const char *s = base_strtab_intern(&ctx->names, name, strlen(name));
  return sym_expr_node(ctx, RX_EXPR_VAR, 0, s, NULL, NULL, NULL);
}

static int arity(rx_expr_kind k) {
  switch (k) {
  case RX_EXPR_CONST:
  case RX_EXPR_VAR:
    return 0;
  case RX_EXPR_NOT:
    return 1;
  case RX_EXPR_SELECT:
    return 3;
  default:
    return 2;
  }
}

const rx_expr *sym_expr_raw(rx_expr_ctx *ctx, rx_expr_kind kind, const rx_expr *a, const rx_expr *b,
                            const rx_expr *c) {
  int n = arity(kind);
  RX_ASSERT(kind < RX_EXPR_KIND_COUNT && n > 0);
  RX_ASSERT(a && (n >= 2) == (b != NULL) && (n == 3) == (c != NULL));
  return sym_expr_node(ctx, kind, 0, NULL, a, b, c);
}

/* ---- queries ---- */

bool sym_expr_is_bool(const rx_expr *e) {
  return e->kind == RX_EXPR_CONST ? e->value == 0 || e->value == 1 : sym_expr_kind_is_bool(e->kind);
}

static void collect(const rx_expr *e, rx_ptrvec *out) {
  while (e) {
    if (e->kind == RX_EXPR_VAR) {
      for (size_t i = 0; i < out->len; i++)
        if (out->data[i] == (void *)e) return;
      base_ptrvec_push(out, (void *)e);
      return;
    }
    if (e->kind == RX_EXPR_CONST) return;
    collect(e->a, out);
    if (e->c) collect(e->b, out);
    e = e->c ? e->c : e->b;
  }
}
void sym_expr_collect_vars(const rx_expr *e, rx_ptrvec *out) { collect(e, out); }

bool sym_expr_uses_var(const rx_expr *e, const rx_expr *var) {
  while (e) {
    if (e == var) return true;
    if (e->kind == RX_EXPR_VAR || e->kind == RX_EXPR_CONST) return false;
    if (sym_expr_uses_var(e->a, var)) return true;
    if (e->c && sym_expr_uses_var(e->b, var)) return true;
    e = e->c ? e->c : e->b;
  }
  return false;
}

/* Structural order: variables first, then the other atoms, products, sums, constants last
 * (so min(n, 16) and sums print their constant at the end). */
static int kind_rank(rx_expr_kind k) {
  static const unsigned char rank[RX_EXPR_KIND_COUNT] = {
      [RX_EXPR_VAR] = 0,  [RX_EXPR_FLOORDIV] = 1, [RX_EXPR_FLOORMOD] = 2, [RX_EXPR_MIN] = 3,
      [RX_EXPR_MAX] = 4,  [RX_EXPR_SELECT] = 5,   [RX_EXPR_EQ] = 6,       [RX_EXPR_NE] = 7,
      [RX_EXPR_LT] = 8,   [RX_EXPR_LE] = 9,       [RX_EXPR_GT] = 10,      [RX_EXPR_GE] = 11,
      [RX_EXPR_AND] = 12, [RX_EXPR_OR] = 13,      [RX_EXPR_NOT] = 14,     [RX_EXPR_MUL] = 15,
      [RX_EXPR_ADD] = 16, [RX_EXPR_SUB] = 17,     [RX_EXPR_CONST] = 18,
  };
  return rank[k];
}

int sym_expr_compare(const rx_expr *a, const rx_expr *b) {
  while (a != b) {
    if (!a) return -1;
    if (!b) return 1;
    int ra = kind_rank(a->kind), rb = kind_rank(b->kind);
    if (ra != rb) return ra < rb ? -1 : 1;
    if (a->kind == RX_EXPR_CONST) return a->value < b->value ? -1 : a->value > b->value;
    if (a->kind == RX_EXPR_VAR) {
      int c = strcmp(a->name, b->name);
      return c < 0 ? -1 : c > 0;
    }
    int c = sym_expr_compare(a->a, b->a);
    if (c) return c;
    if (a->c || b->c) {
      c = sym_expr_compare(a->b, b->b);
      if (c) return c;
      a = a->c;
      b = b->c;
    } else {
      a = a->b;
      b = b->b;
    }
  }
  return 0;
}

/* ---- linear forms ---- */

void sym_poly_init(rx_poly *p) {
  p->t = p->buf;
  p->n = 0;
  p->cap = RX_ARRAY_LEN(p->buf);
  p->c = 0;
  p->ovf = false;
}

void sym_poly_free(rx_poly *p) {
  if (p->t != p->buf) free(p->t);
  sym_poly_init(p);
}

void sym_poly_push(rx_poly *p, const rx_expr *m, int64_t k) {
  if (p->n == p->cap) {
    size_t cap = p->cap * 2;
    rx_term *t = base_malloc(cap * sizeof *t);
    memcpy(t, p->t, p->n * sizeof *t);
    if (p->t != p->buf) free(p->t);
    p->t = t;
    p->cap = cap;
  }
  p->t[p->n].m = m;
  p->t[p->n].k = k;
  p->n++;
}

void sym_poly_add_expr(rx_poly *p, const rx_expr *e, int64_t k) {
  while (k != 0 && !p->ovf) {
    int64_t v;
    switch (e->kind) {
    case RX_EXPR_CONST:
      if (!rx_i64_mul(e->value, k, &v) || !rx_i64_add(p->c, v, &p->c)) p->ovf = true;
      return;
    case RX_EXPR_ADD:
      sym_poly_add_expr(p, e->b, k);
      e = e->a;
      continue;
    case RX_EXPR_SUB:
      if (!rx_i64_mul(k, -1, &v)) {
        p->ovf = true;
        return;
      }
      sym_poly_add_expr(p, e->b, v);
      e = e->a;
      continue;
    case RX_EXPR_MUL:
      if (e->b->kind == RX_EXPR_CONST || e->a->kind == RX_EXPR_CONST) {
        const rx_expr *c = e->b->kind == RX_EXPR_CONST ? e->b : e->a;
        if (!rx_i64_mul(k, c->value, &k)) {
          p->ovf = true;
          return;
        }
        e = c == e->b ? e->a : e->b;
        continue;
      }
      sym_poly_push(p, e, k);
      return;
    default:
      sym_poly_push(p, e, k);
      return;
    }
  }
}

void sym_poly_add_poly(rx_poly *p, const rx_poly *q, int64_t k) {
  int64_t v;
  if (q->ovf) p->ovf = true;
  for (size_t i = 0; i < q->n && !p->ovf; i++) {
    if (!rx_i64_mul(q->t[i].k, k, &v))
      p->ovf = true;
    else
      sym_poly_push(p, q->t[i].m, v);
  }
  if (!rx_i64_mul(q->c, k, &v) || !rx_i64_add(p->c, v, &p->c)) p->ovf = true;
}

static int term_cmp(const void *x, const void *y) {
  return sym_expr_compare(((const rx_term *)x)->m, ((const rx_term *)y)->m);
}

void sym_poly_norm(rx_poly *p) {
  if (p->ovf || p->n == 0) return;
  if (p->n > 1) qsort(p->t, p->n, sizeof *p->t, term_cmp);
  size_t w = 0;
  for (size_t i = 0; i < p->n; i++) {
    if (w > 0 && p->t[w - 1].m == p->t[i].m) {
      if (!rx_i64_add(p->t[w - 1].k, p->t[i].k, &p->t[w - 1].k)) {
        p->ovf = true;
        return;
      }
    } else {
      p->t[w++] = p->t[i];
    }
  }
  size_t n = 0;
  for (size_t i = 0; i < w; i++)
    if (p->t[i].k != 0) p->t[n++] = p->t[i];
  p->n = n;
}

/* x // c * (k * c) + x % c * k  ==>  x * k  (c > 0 a constant); true when something changed */
static bool fold_divmod(rx_poly *p) {
  for (size_t i = 0; i < p->n; i++) {
    const rx_expr *mi = p->t[i].m;
    if (mi->kind != RX_EXPR_FLOORMOD || mi->b->kind != RX_EXPR_CONST || mi->b->value <= 0) continue;
    int64_t want;
    if (!rx_i64_mul(p->t[i].k, mi->b->value, &want)) continue;
    for (size_t j = 0; j < p->n; j++) {
      const rx_expr *mj = p->t[j].m;
      if (mj->kind != RX_EXPR_FLOORDIV || mj->a != mi->a || mj->b != mi->b || p->t[j].k != want)
        continue;
      int64_t k = p->t[i].k;
      p->t[i].k = 0;
      p->t[j].k = 0;
      sym_poly_add_expr(p, mi->a, k);
      return true;
    }
  }
  return false;
}

/* normalize, with the div/mod recombination */
static void poly_canon(rx_poly *p) {
  sym_poly_norm(p);
  while (!p->ovf && fold_divmod(p)) sym_poly_norm(p);
}

static const rx_expr *poly_emit(rx_expr_ctx *ctx, const rx_poly *p) {
  const rx_expr *r = NULL;
  for (size_t i = 0; i < p->n; i++) {
    const rx_expr *t = p->t[i].m;
    if (p->t[i].k != 1) t = bin(ctx, RX_EXPR_MUL, t, cst(ctx, p->t[i].k));
    r = r ? bin(ctx, RX_EXPR_ADD, r, t) : t;
  }
  if (p->c != 0 || !r) {
    const rx_expr *c = cst(ctx, p->c);
    r = r ? bin(ctx, RX_EXPR_ADD, r, c) : c;
  }
  return r;
}

const rx_expr *sym_poly_build(rx_expr_ctx *ctx, rx_poly *p) {
  poly_canon(p);
  return p->ovf ? NULL : poly_emit(ctx, p);
}

/* The canonical expression of e's terms without its constant part; *off gets the constant. */
static const rx_expr *sym_expr_split_const(rx_expr_ctx *ctx, const rx_expr *e, int64_t *off) {
  *off = 0;
  if (e->kind == RX_EXPR_CONST) {
    *off = e->value;
    return cst(ctx, 0);
  }
  if (e->kind != RX_EXPR_ADD || e->b->kind != RX_EXPR_CONST) return e;
  /* canonical sums keep their constant last */
  *off = e->b->value;
  return e->a;
}

/* ---- monomials ---- */

typedef RX_VEC(const rx_expr *) exprvec;

static void mono_atoms(const rx_expr *m, exprvec *out) {
  while (m->kind == RX_EXPR_MUL && m->b->kind != RX_EXPR_CONST && m->a->kind != RX_EXPR_CONST) {
    RX_VEC_PUSH(out, m->b);
    m = m->a;
  }
  RX_VEC_PUSH(out, m);
}

static int expr_cmp_q(const void *x, const void *y) {
  return sym_expr_compare(*(const rx_expr *const *)x, *(const rx_expr *const *)y);
}

static const rx_expr *chain(rx_expr_ctx *ctx, rx_expr_kind k, const rx_expr **v, size_t n) {
  const rx_expr *r = v[0];
  for (size_t i = 1; i < n; i++) r = bin(ctx, k, r, v[i]);
  return r;
}

static const rx_expr *mono_mul(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  exprvec v = {0};
  mono_atoms(a, &v);
  mono_atoms(b, &v);
  if (v.len > 1) qsort(v.data, v.len, sizeof *v.data, expr_cmp_q);
  const rx_expr *r = chain(ctx, RX_EXPR_MUL, v.data, v.len);
  free(v.data);
  return r;
}

/* ---- canonicalizing helpers: canonical operands in, canonical node or NULL out ---- */

static const rx_expr *c_div(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b);
static const rx_expr *c_mod(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b);
static const rx_expr *c_cmp(rx_expr_ctx *ctx, rx_expr_kind k, const rx_expr *a, const rx_expr *b);

static const rx_expr *c_lin(rx_expr_ctx *ctx, const rx_expr *a, int64_t ka, const rx_expr *b,
                            int64_t kb) {
  rx_poly p;
  sym_poly_init(&p);
  sym_poly_add_expr(&p, a, ka);
  if (b) sym_poly_add_expr(&p, b, kb);
  const rx_expr *r = sym_poly_build(ctx, &p);
  sym_poly_free(&p);
  return r;
}
static const rx_expr *c_add(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  return a && b ? c_lin(ctx, a, 1, b, 1) : NULL;
}
static const rx_expr *c_neg(rx_expr_ctx *ctx, const rx_expr *a) {
  return a ? c_lin(ctx, a, -1, NULL, 0) : NULL;
}

static const rx_expr *c_mul(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  if (b->kind == RX_EXPR_CONST) return c_lin(ctx, a, b->value, NULL, 0);
  if (a->kind == RX_EXPR_CONST) return c_lin(ctx, b, a->value, NULL, 0);
  rx_poly pa, pb, r;
  sym_poly_init(&pa);
  sym_poly_init(&pb);
  sym_poly_init(&r);
  sym_poly_add_expr(&pa, a, 1);
  sym_poly_add_expr(&pb, b, 1);
  poly_canon(&pa);
  poly_canon(&pb);
  const rx_expr *res = NULL;
  if (pa.ovf || pb.ovf) goto done;
  size_t na = pa.n + (pa.c != 0), nb = pb.n + (pb.c != 0);
  if (na > 1 && nb > 1 && na * nb > EXPAND_CAP) {
    res = mono_mul(ctx, a, b); /* too big to expand: a product of two sums */
    goto done;
  }
  int64_t v;
  if (!rx_i64_mul(pa.c, pb.c, &r.c)) r.ovf = true;
  for (size_t i = 0; i < pa.n && !r.ovf; i++) {
    if (!rx_i64_mul(pa.t[i].k, pb.c, &v))
      r.ovf = true;
    else
      sym_poly_push(&r, pa.t[i].m, v);
    for (size_t j = 0; j < pb.n && !r.ovf; j++) {
      if (!rx_i64_mul(pa.t[i].k, pb.t[j].k, &v))
        r.ovf = true;
      else
        sym_poly_push(&r, mono_mul(ctx, pa.t[i].m, pb.t[j].m), v);
    }
  }
  for (size_t j = 0; j < pb.n && !r.ovf; j++) {
    if (!rx_i64_mul(pb.t[j].k, pa.c, &v))
      r.ovf = true;
    else
      sym_poly_push(&r, pb.t[j].m, v);
  }
  res = sym_poly_build(ctx, &r);
done:
  sym_poly_free(&pa);
  sym_poly_free(&pb);
  sym_poly_free(&r);
  return res;
}

static uint64_t poly_gcd(const rx_poly *p, uint64_t g) {
  for (size_t i = 0; i < p->n; i++) g = rx_u64_gcd(rx_u64_abs(p->t[i].k), g);
  return g;
}

/* a // k, k > 1 */
static const rx_expr *c_div_pos(rx_expr_ctx *ctx, const rx_expr *a, int64_t k) {
  rx_poly p, out, in;
  sym_poly_init(&p);
  sym_poly_init(&out);
  sym_poly_init(&in);
  const rx_expr *res = NULL;
  sym_poly_add_expr(&p, a, 1);
  poly_canon(&p);
  if (p.ovf) goto done;
  /* pull out multiples of k: constants by floor, coefficients by truncation */
  rx_i64_floordiv(p.c, k, &out.c);
  rx_i64_floormod(p.c, k, &in.c);
  for (size_t i = 0; i < p.n; i++) {
    if (p.t[i].k / k) sym_poly_push(&out, p.t[i].m, p.t[i].k / k);
    if (p.t[i].k % k) sym_poly_push(&in, p.t[i].m, p.t[i].k % k);
  }
  const rx_expr *outer = poly_emit(ctx, &out), *d;
  if (in.n == 0) {
    res = outer; /* 0 <= in.c < k */
    goto done;
  }
  uint64_t g = poly_gcd(&in, (uint64_t)k);
  if (g > 1) {
    /* (g*Q + r) // (g*k') == (Q + r // g) // k' */
    for (size_t i = 0; i < in.n; i++) in.t[i].k /= (int64_t)g;
    in.c /= (int64_t)g;
    const rx_expr *inner = poly_emit(ctx, &in);
    int64_t k2 = k / (int64_t)g;
    d = k2 == 1 ? inner : c_div_pos(ctx, inner, k2);
  } else if (in.n == 1 && in.t[0].k == 1 && in.t[0].m->kind == RX_EXPR_FLOORDIV &&
             in.t[0].m->b->kind == RX_EXPR_CONST && in.t[0].m->b->value > 0) {
    /* (x // k1 + r) // k == (x + r * k1) // (k1 * k) */
    int64_t k1 = in.t[0].m->b->value, rk1, kk;
    if (!rx_i64_mul(in.c, k1, &rk1) || !rx_i64_mul(k1, k, &kk)) {
      d = bin(ctx, RX_EXPR_FLOORDIV, poly_emit(ctx, &in), cst(ctx, k));
    } else {
      const rx_expr *x = c_add(ctx, in.t[0].m->a, cst(ctx, rk1));
      d = x ? c_div(ctx, x, cst(ctx, kk)) : NULL;
    }
  } else {
    d = bin(ctx, RX_EXPR_FLOORDIV, poly_emit(ctx, &in), cst(ctx, k));
  }
  res = c_add(ctx, outer, d);
done:
  sym_poly_free(&p);
  sym_poly_free(&out);
  sym_poly_free(&in);
  return res;
}

/* a % k, k > 1 */
static const rx_expr *c_mod_pos(rx_expr_ctx *ctx, const rx_expr *a, int64_t k) {
  rx_poly p, in;
  sym_poly_init(&p);
  sym_poly_init(&in);
  const rx_expr *res = NULL;
  sym_poly_add_expr(&p, a, 1);
  poly_canon(&p);
  if (p.ovf) goto done;
  rx_i64_floormod(p.c, k, &in.c);
  bool nested = false;
  for (size_t i = 0; i < p.n; i++) {
    int64_t t = p.t[i].k % k;
    if (!t) continue;
    const rx_expr *m = p.t[i].m;
    /* x % k1 == x (mod k) when k divides k1 */
    if (m->kind == RX_EXPR_FLOORMOD && m->b->kind == RX_EXPR_CONST && m->b->value > 0 &&
        m->b->value % k == 0) {
      sym_poly_add_expr(&in, m->a, t);
      nested = true;
    } else {
      sym_poly_push(&in, m, t);
    }
  }
  if (nested) {
    const rx_expr *inner = sym_poly_build(ctx, &in);
    res = inner ? c_mod_pos(ctx, inner, k) : NULL;
    goto done;
  }
  if (in.n == 0) {
    res = cst(ctx, in.c);
    goto done;
  }
  uint64_t g = poly_gcd(&in, (uint64_t)k);
  if (g > 1) {
    /* (g*Q + r) % (g*k') == g * ((Q + r / g) % k') + r % g */
    int64_t gi = (int64_t)g, r2 = in.c % gi;
    for (size_t i = 0; i < in.n; i++) in.t[i].k /= gi;
    in.c /= gi;
    const rx_expr *inner = poly_emit(ctx, &in);
    int64_t k2 = k / gi;
    const rx_expr *m = k2 == 1 ? cst(ctx, 0) : c_mod_pos(ctx, inner, k2);
    res = m ? c_lin(ctx, m, gi, cst(ctx, r2), 1) : NULL;
  } else {
    res = bin(ctx, RX_EXPR_FLOORMOD, poly_emit(ctx, &in), cst(ctx, k));
  }
done:
  sym_poly_free(&p);
  sym_poly_free(&in);
  return res;
}

static const rx_expr *c_div(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  if (b->kind != RX_EXPR_CONST) return rx_expr_is_const(a, 0) ? a : NULL;
  int64_t k = b->value, q;
  if (a->kind == RX_EXPR_CONST) return rx_i64_floordiv(a->value, k, &q) ? cst(ctx, q) : NULL;
  if (k == 0 || k == INT64_MIN) return NULL;
  if (k == 1) return a;
  if (k < 0) {
    /* a // -k == (-a) // k */
    const rx_expr *na = c_neg(ctx, a);
    return na ? c_div(ctx, na, cst(ctx, -k)) : NULL;
  }
  return c_div_pos(ctx, a, k);
}

static const rx_expr *c_mod(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  if (b->kind != RX_EXPR_CONST) return rx_expr_is_const(a, 0) ? a : NULL;
  int64_t k = b->value, r;
  if (a->kind == RX_EXPR_CONST) return rx_i64_floormod(a->value, k, &r) ? cst(ctx, r) : NULL;
  if (k == 0 || k == INT64_MIN) return NULL;
  if (k == 1 || k == -1) return cst(ctx, 0);
  if (k < 0) {
    /* a % -k == -((-a) % k) */
    const rx_expr *na = c_neg(ctx, a);
    return na ? c_neg(ctx, c_mod(ctx, na, cst(ctx, -k))) : NULL;
  }
  return c_mod_pos(ctx, a, k);
}

/* the operands of nested min (or max) nodes */
static void flatten(const rx_expr *e, rx_expr_kind k, exprvec *out) {
  while (e->kind == k) {
    flatten(e->b, k, out);
    e = e->a;
  }
  RX_VEC_PUSH(out, e);
}

static bool contains(const exprvec *v, const rx_expr *e) {
  for (size_t i = 0; i < v->len; i++)
    if (v->data[i] == e) return true;
  return false;
}

static const rx_expr *c_minmax(rx_expr_ctx *ctx, rx_expr_kind k, const rx_expr *a,
                               const rx_expr *b) {
  bool is_min = k == RX_EXPR_MIN;
  rx_expr_kind dual = is_min ? RX_EXPR_MAX : RX_EXPR_MIN;
  exprvec ops = {0}, base = {0}, inner = {0};
  RX_VEC(int64_t) off = {0};
  flatten(a, k, &ops);
  flatten(b, k, &ops);
  for (size_t i = 0; i < ops.len; i++) {
    int64_t o;
    RX_VEC_PUSH(&base, sym_expr_split_const(ctx, ops.data[i], &o));
    RX_VEC_PUSH(&off, o);
  }
  /* of operands differing by a constant keep the smallest (min) or largest (max): mark the
   * losers first (base/off are read for every pair), then compact */
  bool *lose = base_calloc(ops.len, sizeof *lose);
  for (size_t i = 0; i < ops.len; i++)
    for (size_t j = 0; j < ops.len && !lose[i]; j++) {
      if (j == i || base.data[j] != base.data[i]) continue;
      bool better = is_min ? off.data[j] < off.data[i] : off.data[j] > off.data[i];
      lose[i] = better || (off.data[j] == off.data[i] && j < i);
    }
  size_t n = 0;
  for (size_t i = 0; i < ops.len; i++)
    if (!lose[i]) ops.data[n++] = ops.data[i];
  ops.len = n;
  free(lose);
  /* min(x, max(x, y)) == x */
  size_t w = 0;
  for (size_t i = 0; i < ops.len; i++) {
    bool drop = false;
    if (ops.data[i]->kind == dual) {
      inner.len = 0;
      flatten(ops.data[i], dual, &inner);
      for (size_t j = 0; j < inner.len && !drop; j++) drop = contains(&ops, inner.data[j]);
    }
    if (!drop) ops.data[w++] = ops.data[i];
  }
  ops.len = w;
  if (ops.len > 1) qsort(ops.data, ops.len, sizeof *ops.data, expr_cmp_q);
  const rx_expr *r = chain(ctx, k, ops.data, ops.len);
  free(ops.data);
  free(base.data);
  free(off.data);
  free(inner.data);
  return r;
}

/* ceil(a / b), b > 0 */
static int64_t ceil_div_pos(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && a > 0) q++;
  return q;
}

static const rx_expr *c_cmp(rx_expr_ctx *ctx, rx_expr_kind k, const rx_expr *a, const rx_expr *b) {
  if (k == RX_EXPR_GT || k == RX_EXPR_GE) {
    const rx_expr *t = a;
    a = b;
    b = t;
    k = k == RX_EXPR_GT ? RX_EXPR_LT : RX_EXPR_LE;
  }
  rx_poly d, pos, neg;
  sym_poly_init(&d);
  sym_poly_init(&pos);
  sym_poly_init(&neg);
  const rx_expr *res = NULL;
  sym_poly_add_expr(&d, a, 1);
  sym_poly_add_expr(&d, b, -1);
  poly_canon(&d);
  if (d.ovf) goto done;
  if (d.n == 0) {
    bool v = k == RX_EXPR_LT   ? d.c < 0
             : k == RX_EXPR_LE ? d.c <= 0
             : k == RX_EXPR_EQ ? d.c == 0
                               : d.c != 0;
    res = cst(ctx, v);
    goto done;
  }
  if (d.c == INT64_MIN) goto done;
  uint64_t ug = poly_gcd(&d, 0);
  int64_t g = ug > (uint64_t)INT64_MAX ? 1 : (int64_t)ug, nc = -d.c, K = 0;
  /* d = g*Q + c; the comparison becomes Q op K */
  if (k == RX_EXPR_LT) {
    K = ceil_div_pos(nc, g);
  } else if (k == RX_EXPR_LE) {
    rx_i64_floordiv(nc, g, &K);
  } else {
    if (nc % g != 0) {
      res = cst(ctx, k == RX_EXPR_NE);
      goto done;
    }
    K = nc / g;
  }
  for (size_t i = 0; i < d.n; i++) d.t[i].k /= g;
  if ((k == RX_EXPR_EQ || k == RX_EXPR_NE) && d.t[0].k < 0) {
    for (size_t i = 0; i < d.n; i++)
      if (!rx_i64_mul(d.t[i].k, -1, &d.t[i].k)) goto done;
    K = -K; /* |K| <= |nc| < 2^63 */
  }
  if ((k == RX_EXPR_EQ || k == RX_EXPR_NE) && d.n == 1 && d.t[0].k == 1 &&
      sym_expr_is_bool(d.t[0].m)) {
    /* a boolean compared with 0 or 1 */
    const rx_expr *m = d.t[0].m;
    if (K != 0 && K != 1)
      res = cst(ctx, k == RX_EXPR_NE);
    else
      res = (K == 1) == (k == RX_EXPR_EQ) ? m : sym_expr_canon_not(ctx, m);
    goto done;
  }
  /* positive terms on the left, negative ones on the right, the constant on the side where
   * it is positive (or alone on its side) */
  for (size_t i = 0; i < d.n; i++) {
    if (d.t[i].k > 0)
      sym_poly_push(&pos, d.t[i].m, d.t[i].k);
    else if (!rx_i64_mul(d.t[i].k, -1, &d.t[i].k))
      goto done;
    else
      sym_poly_push(&neg, d.t[i].m, d.t[i].k);
  }
  if (neg.n == 0)
    neg.c = K;
  else if (pos.n == 0)
    pos.c = -K;
  else if (K > 0)
    neg.c = K;
  else
    pos.c = -K;
  res = bin(ctx, k, poly_emit(ctx, &pos), poly_emit(ctx, &neg));
done:
  sym_poly_free(&d);
  sym_poly_free(&pos);
  sym_poly_free(&neg);
  return res;
}

const rx_expr *sym_expr_canon_not(rx_expr_ctx *ctx, const rx_expr *e) {
  switch (e->kind) {
  case RX_EXPR_CONST:
    return cst(ctx, e->value == 0);
  case RX_EXPR_EQ:
    return bin(ctx, RX_EXPR_NE, e->a, e->b);
  case RX_EXPR_NE:
    return bin(ctx, RX_EXPR_EQ, e->a, e->b);
  case RX_EXPR_LT:
    return c_cmp(ctx, RX_EXPR_LE, e->b, e->a);
  case RX_EXPR_LE:
    return c_cmp(ctx, RX_EXPR_LT, e->b, e->a);
  /* (GT, GE and NOT only appear where a canonicalization gave up on overflow) */
  case RX_EXPR_GT:
    return c_cmp(ctx, RX_EXPR_LE, e->a, e->b);
  case RX_EXPR_GE:
    return c_cmp(ctx, RX_EXPR_LT, e->a, e->b);
  case RX_EXPR_NOT:
    return sym_expr_is_bool(e->a) ? e->a : c_cmp(ctx, RX_EXPR_NE, e->a, cst(ctx, 0));
  case RX_EXPR_AND:
  case RX_EXPR_OR: {
    /* De Morgan */
    exprvec ops = {0};
    flatten(e, e->kind, &ops);
    rx_expr_kind k = e->kind == RX_EXPR_AND ? RX_EXPR_OR : RX_EXPR_AND;
    const rx_expr *r = NULL;
    for (size_t i = 0; i < ops.len; i++) {
      const rx_expr *n = sym_expr_canon_not(ctx, ops.data[i]);
      if (!n) {
        r = NULL;
        break;
      }
      r = r ? sym_expr_make(ctx, k, r, n, NULL) : n;
    }
    free(ops.data);
    return r;
  }
  default:
    return c_cmp(ctx, RX_EXPR_EQ, e, cst(ctx, 0)); /* e is not boolean here */
  }
}

static const rx_expr *c_logic(rx_expr_ctx *ctx, rx_expr_kind k, const rx_expr *a,
                              const rx_expr *b) {
  bool is_and = k == RX_EXPR_AND;
  exprvec ops = {0};
  const rx_expr *res = NULL;
  flatten(a, k, &ops);
  flatten(b, k, &ops);
  size_t n = 0;
  for (size_t i = 0; i < ops.len; i++) {
    const rx_expr *o = ops.data[i];
    if (!sym_expr_is_bool(o)) {
      o = c_cmp(ctx, RX_EXPR_NE, o, cst(ctx, 0));
      if (o && o->kind == k) {
        /* x != 0 can itself be a conjunction (disjunction): its operands join the list */
        flatten(o, k, &ops);
        continue;
      }
    }
    if (!o) goto done;
    if (o->kind == RX_EXPR_CONST) {
      if ((o->value != 0) != is_and) {
        res = o; /* 0 && ..., 1 || ... */
        goto done;
      }
      continue;
    }
    ops.data[n++] = o;
  }
  ops.len = n;
  if (ops.len > 1) qsort(ops.data, ops.len, sizeof *ops.data, expr_cmp_q);
  n = 0;
  for (size_t i = 0; i < ops.len; i++)
    if (n == 0 || ops.data[n - 1] != ops.data[i]) ops.data[n++] = ops.data[i];
  ops.len = n;
  for (size_t i = 0; i < ops.len && ops.len > 1; i++) {
    const rx_expr *no = sym_expr_canon_not(ctx, ops.data[i]);
    if (no && contains(&ops, no)) {
      res = cst(ctx, !is_and); /* x && !x, x || !x */
      goto done;
    }
  }
  res = ops.len == 0 ? cst(ctx, is_and) : chain(ctx, k, ops.data, ops.len);
done:
  free(ops.data);
  return res;
}

static const rx_expr *c_select(rx_expr_ctx *ctx, const rx_expr *c, const rx_expr *t,
                               const rx_expr *f) {
  if (!sym_expr_is_bool(c)) c = c_cmp(ctx, RX_EXPR_NE, c, cst(ctx, 0));
  if (!c) return NULL;
  if (c->kind == RX_EXPR_CONST) return c->value ? t : f;
  if (t == f) return t;
  if (c->kind == RX_EXPR_NE) {
    const rx_expr *x = t;
    c = bin(ctx, RX_EXPR_EQ, c->a, c->b);
    t = f;
    f = x;
  }
  if (rx_expr_is_const(t, 1) && rx_expr_is_const(f, 0)) return c;
  if (rx_expr_is_const(t, 0) && rx_expr_is_const(f, 1)) return sym_expr_canon_not(ctx, c);
  return sym_expr_node(ctx, RX_EXPR_SELECT, 0, NULL, c, t, f);
}

/* The canonical form of kind(a, b, c) for canonical operands; never NULL. */
static const rx_expr *make_canon(rx_expr_ctx *ctx, rx_expr_kind k, const rx_expr *a,
                                 const rx_expr *b, const rx_expr *c) {
  const rx_expr *r = NULL;
  switch (k) {
  case RX_EXPR_ADD:
    r = c_lin(ctx, a, 1, b, 1);
    break;
  case RX_EXPR_SUB:
    r = c_lin(ctx, a, 1, b, -1);
    break;
  case RX_EXPR_MUL:
    r = c_mul(ctx, a, b);
    break;
  case RX_EXPR_FLOORDIV:
    r = c_div(ctx, a, b);
    break;
  case RX_EXPR_FLOORMOD:
    r = c_mod(ctx, a, b);
    break;
  case RX_EXPR_MIN:
  case RX_EXPR_MAX:
    r = c_minmax(ctx, k, a, b);
    break;
  case RX_EXPR_EQ:
  case RX_EXPR_NE:
  case RX_EXPR_LT:
  case RX_EXPR_LE:
    r = c_cmp(ctx, k, a, b);
    break;
  case RX_EXPR_GT:
  case RX_EXPR_GE:
    r = c_cmp(ctx, k, a, b);
    if (!r) { /* keep the canonical kinds even when giving up */
      k = k == RX_EXPR_GT ? RX_EXPR_LT : RX_EXPR_LE;
      const rx_expr *t = a;
      a = b;
      b = t;
    }
    break;
  case RX_EXPR_AND:
  case RX_EXPR_OR:
    r = c_logic(ctx, k, a, b);
    break;
  case RX_EXPR_NOT:
    r = sym_expr_canon_not(ctx, a);
    break;
  case RX_EXPR_SELECT:
    r = c_select(ctx, a, b, c);
    break;
  default:
    RX_ASSERT(!"make_canon: leaf kind");
  }
  if (!r) r = sym_expr_node(ctx, k, 0, NULL, a, b, c); /* int64 overflow: keep as given */
  canon_set(ctx, r, r);
  return r;
}

const rx_expr *sym_expr_simplify(rx_expr_ctx *ctx, const rx_expr *e) {
  const rx_expr *r = canon_get(ctx, e);
  if (r) return r;
  if (e->kind == RX_EXPR_CONST || e->kind == RX_EXPR_VAR) {
    r = e;
  } else {
    const rx_expr *a = sym_expr_simplify(ctx, e->a);
    const rx_expr *b = e->b ? sym_expr_simplify(ctx, e->b) : NULL;
    const rx_expr *c = e->c ? sym_expr_simplify(ctx, e->c) : NULL;
    r = make_canon(ctx, e->kind, a, b, c);
  }
  canon_set(ctx, e, r);
  return r;
}

/* ---- public canonicalizing constructors ---- */

const rx_expr *sym_expr_make(rx_expr_ctx *ctx, rx_expr_kind kind, const rx_expr *a,
                             const rx_expr *b, const rx_expr *c) {
  int n = arity(kind);
  RX_ASSERT(kind < RX_EXPR_KIND_COUNT && n > 0);
  RX_ASSERT(a && (n >= 2) == (b != NULL) && (n == 3) == (c != NULL));
  a = sym_expr_simplify(ctx, a);
  if (b) b = sym_expr_simplify(ctx, b);
  if (c) c = sym_expr_simplify(ctx, c);
  return make_canon(ctx, kind, a, b, c);
}

const rx_expr *sym_expr_add(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_make(ctx, RX_EXPR_ADD, a, b, NULL);
}
const rx_expr *sym_expr_sub(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_make(ctx, RX_EXPR_SUB, a, b, NULL);
}
const rx_expr *sym_expr_mul(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_make(ctx, RX_EXPR_MUL, a, b, NULL);
}
const rx_expr *sym_expr_neg(rx_expr_ctx *ctx, const rx_expr *a) {
  return sym_expr_make(ctx, RX_EXPR_MUL, a, cst(ctx, -1), NULL);
}
const rx_expr *sym_expr_floordiv(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_make(ctx, RX_EXPR_FLOORDIV, a, b, NULL);
}
const rx_expr *sym_expr_floormod(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_make(ctx, RX_EXPR_FLOORMOD, a, b, NULL);
}
const rx_expr *sym_expr_min(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_make(ctx, RX_EXPR_MIN, a, b, NULL);
}
const rx_expr *sym_expr_max(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_make(ctx, RX_EXPR_MAX, a, b, NULL);
}
const rx_expr *sym_expr_cmp(rx_expr_ctx *ctx, rx_expr_kind cmp, const rx_expr *a,
                            const rx_expr *b) {
  RX_ASSERT(cmp >= RX_EXPR_EQ && cmp <= RX_EXPR_GE);
  return sym_expr_make(ctx, cmp, a, b, NULL);
}
const rx_expr *sym_expr_and(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_make(ctx, RX_EXPR_AND, a, b, NULL);
}
const rx_expr *sym_expr_or(rx_expr_ctx *ctx, const rx_expr *a, const rx_expr *b) {
  return sym_expr_make(ctx, RX_EXPR_OR, a, b, NULL);
}
const rx_expr *sym_expr_not(rx_expr_ctx *ctx, const rx_expr *a) {
  return sym_expr_make(ctx, RX_EXPR_NOT, a, NULL, NULL);
}
const rx_expr *sym_expr_select(rx_expr_ctx *ctx, const rx_expr *c, const rx_expr *t,
                               const rx_expr *f) {
  return sym_expr_make(ctx, RX_EXPR_SELECT, c, t, f);
}
