/* shapes/analyzer.c: facts about symbolic values, and bounds, proofs, divisibility and
 * simplification that use them.
 *
 * Facts are kept three ways, all on one undo stack (mark/reset):
 *   - per expression (a variable, or any canonical atom or mono): a range and a residue
 *     (x % mod == rem), from facts over one term (n <= 4096, i * 4 < 7, n % 16 == 0);
 *   - relations: linear facts over two or more terms, as sum <= 0 (m - n <= 0); each new
 *     relation also tightens the range of each of its terms from the bounds of the others;
 *   - every fact as given (canonical), so prove() of exactly a fact it cannot use answers true.
 *
 * Bounds are interval arithmetic over the exact (unbounded) integers: INT64_MIN / INT64_MAX
 * mean unbounded, and a bound that leaves int64 becomes unbounded (or is clamped inwards
 * where that is still sound: a lower bound above INT64_MAX means no value exists at all).
 * prove(a <= b) looks at the bounds of a - b, then of a - b minus (positive multiples of) one
 * or two relations. Everything it cannot show is RX_UNKNOWN. */
#include "shapes_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH  12 /* nesting of prove/bounds through facts (cuts cycles) */
#define MAX_PAIRS  24 /* relations beyond this are only tried one at a time */
#define MAX_ROUNDS 4  /* analyzer simplification rounds */

typedef struct info {
  int64_t lo, hi;   /* range (INT64_MIN / INT64_MAX: unbounded) */
  int64_t mod, rem; /* x % mod == rem; mod 1: nothing known */
} info;

static const info INFO_NONE = {INT64_MIN, INT64_MAX, 1, 0};

typedef struct rel {
  rx_term *t; /* heap, sorted, merged */
  size_t n;
  int64_t c; /* sum of t + c <= 0 */
} rel;

typedef enum undo_kind { U_INFO, U_REL, U_FACT } undo_kind;
typedef struct undo {
  undo_kind kind;
  const rx_expr *key; /* U_INFO: whose info */
  info old;           /* U_INFO: its info before */
} undo;

typedef struct modset {
  int64_t m, r; /* x == m * k + r for some k; m 0: x == r exactly; else 0 <= r < m */
} modset;

struct rx_analyzer {
  rx_expr_ctx *ctx;
  /* per-expression facts: open addressing keyed by pointer */
  const rx_expr **keys;
  info *infos;
  size_t cap, count;
  RX_VEC(rel) rels;
  RX_VEC(const rx_expr *) facts;
  RX_VEC(undo) log;
  /* bounds cache; an entry is valid while its gen is the current one */
  const rx_expr **bkeys;
  rx_interval *bvals;
  uint32_t *bgen;
  size_t bcap, bcount;
  uint32_t gen;
  int depth;   /* current prove/bounds nesting */
  bool contra; /* the last fact emptied some range */
};

/* ---- the per-expression map ---- */

static size_t hslot(const rx_expr *e, size_t cap) {
  return (size_t)(e->hash ^ ((uint64_t)e->id * 0x9e3779b97f4a7c15ull)) & (cap - 1);
}

static size_t info_find(const rx_analyzer *an, const rx_expr *e) {
  if (!an->cap) return SIZE_MAX;
  size_t i = hslot(e, an->cap);
  while (an->keys[i] && an->keys[i] != e) i = (i + 1) & (an->cap - 1);
  return an->keys[i] ? i : SIZE_MAX;
}

static info info_get(const rx_analyzer *an, const rx_expr *e) {
  size_t i = info_find(an, e);
  return i == SIZE_MAX ? INFO_NONE : an->infos[i];
}

static void info_raw_set(rx_analyzer *an, const rx_expr *e, info v) {
  if ((an->count + 1) * 2 > an->cap) {
    size_t cap = an->cap ? an->cap * 2 : 64;
    const rx_expr **keys = base_calloc(cap, sizeof *keys);
    info *infos = base_calloc(cap, sizeof *infos);
    for (size_t i = 0; i < an->cap; i++) {
      if (!an->keys[i]) continue;
      size_t j = hslot(an->keys[i], cap);
      while (keys[j]) j = (j + 1) & (cap - 1);
      keys[j] = an->keys[i];
      infos[j] = an->infos[i];
    }
    free(an->keys);
    free(an->infos);
    an->keys = keys;
    an->infos = infos;
    an->cap = cap;
  }
  size_t i = hslot(e, an->cap);
  while (an->keys[i] && an->keys[i] != e) i = (i + 1) & (an->cap - 1);
  if (!an->keys[i]) {
    an->keys[i] = e;
    an->count++;
  }
  an->infos[i] = v;
}

static void info_set(rx_analyzer *an, const rx_expr *e, info v) {
  undo u = {U_INFO, e, info_get(an, e)};
  RX_VEC_PUSH(&an->log, u);
  info_raw_set(an, e, v);
  an->gen++;
  if (v.lo > v.hi) an->contra = true;
}

/* ---- lifetime, scopes ---- */

rx_analyzer *sym_analyzer_new(rx_expr_ctx *ctx) {
  rx_analyzer *an = base_calloc(1, sizeof *an);
  an->ctx = ctx;
  an->gen = 1;
  return an;
}

void sym_analyzer_free(rx_analyzer *an) {
  if (!an) return;
  for (size_t i = 0; i < an->rels.len; i++) free(an->rels.data[i].t);
  free(an->rels.data);
  free(an->facts.data);
  free(an->log.data);
  free(an->keys);
  free(an->infos);
  free(an->bkeys);
  free(an->bvals);
  free(an->bgen);
  free(an);
}

rx_expr_ctx *sym_analyzer_ctx(rx_analyzer *an) { return an->ctx; }

size_t sym_analyzer_mark(rx_analyzer *an) { return an->log.len; }

void sym_analyzer_reset(rx_analyzer *an, size_t mark) {
  RX_ASSERT(mark <= an->log.len);
  while (an->log.len > mark) {
    undo u = an->log.data[--an->log.len];
    switch (u.kind) {
    case U_INFO:
      info_raw_set(an, u.key, u.old);
      break;
    case U_REL:
      free(an->rels.data[--an->rels.len].t);
      break;
    case U_FACT:
      an->facts.len--;
      break;
    }
  }
  an->gen++;
}

/* ---- extended integers for interval arithmetic ----
 * An endpoint is finite, infinite, or (only inside one operation) an exact value beyond int64
 * whose size is not kept. Each interval operation ends by normalizing its endpoints for their
 * side, which is what keeps overflow sound: a lower bound beyond INT64_MAX becomes INT64_MAX (a
 * smaller lower bound), one below INT64_MIN becomes -inf; upper bounds the other way round. */

typedef struct xv {
  int s; /* -2: -inf, -1: finite below INT64_MIN, 0: finite v, 1: finite above INT64_MAX, 2: +inf */
  int64_t v;
} xv;

static xv xf(int64_t v) { return (xv){0, v}; }
static xv xs(int s) { return (xv){s, 0}; }
static xv xlo(int64_t lo) { return lo == INT64_MIN ? xs(-2) : xf(lo); }
static xv xhi(int64_t hi) { return hi == INT64_MAX ? xs(2) : xf(hi); }
static int64_t xi(xv x) { return x.s < 0 ? INT64_MIN : x.s > 0 ? INT64_MAX : x.v; }
static int xsign(xv x) { return x.s ? (x.s > 0 ? 1 : -1) : (x.v > 0) - (x.v < 0); }
static int xcmp(xv a, xv b) {
  if (a.s != b.s) return a.s < b.s ? -1 : 1;
  if (a.s) return 0;
  return (a.v > b.v) - (a.v < b.v);
}
static xv xmin(xv a, xv b) { return xcmp(a, b) <= 0 ? a : b; }
static xv xmax(xv a, xv b) { return xcmp(a, b) >= 0 ? a : b; }
/* an endpoint made fit to be a lower (upper) bound */
static xv nlo(xv x) { return x.s == -1 ? xs(-2) : x.s > 0 ? xf(INT64_MAX) : x; }
static xv nhi(xv x) { return x.s == 1 ? xs(2) : x.s < 0 ? xf(INT64_MIN) : x; }

/* a + b for endpoints of one side (side -1: lower, 1: upper; it wins for inf + -inf) */
static xv xadd(xv a, xv b, int side) {
  if (a.s == 2 * -b.s && a.s) return xs(2 * side);
  if (a.s) return a;
  if (b.s) return b;
  int64_t r;
  if (rx_i64_add(a.v, b.v, &r)) return xf(r);
  return xs(a.v > 0 ? 1 : -1);
}

static xv xmul(xv a, xv b) {
  int sa = xsign(a), sb = xsign(b);
  if (sa == 0 || sb == 0) return xf(0);
  if (a.s == 2 || a.s == -2 || b.s == 2 || b.s == -2) return xs(2 * sa * sb);
  int64_t r;
  if (!a.s && !b.s && rx_i64_mul(a.v, b.v, &r)) return xf(r);
  return xs(sa * sb); /* beyond int64 */
}

static xv xneg(xv a) {
  if (a.s) return xs(-a.s);
  if (a.v == INT64_MIN) return xs(1);
  return xf(-a.v);
}

/* floor(a / b) for b >= 1 finite or +inf */
static xv xdiv(xv a, xv b) {
  if (b.s == 2) {
    if (a.s) return xf(a.s < 0 ? -1 : 0); /* never the extreme: the finite corner decides */
    return xf(a.v >= 0 ? 0 : -1);
  }
  if (a.s) return a;
  int64_t q;
  rx_i64_floordiv(a.v, b.v, &q);
  return xf(q);
}

typedef struct xiv {
  xv lo, hi; /* normalized: lo is finite or -inf, hi finite or +inf */
} xiv;

static xiv to_x(rx_interval v) { return (xiv){xlo(v.lo), xhi(v.hi)}; }
static rx_interval from_x(xiv v) { return (rx_interval){xi(v.lo), xi(v.hi)}; }
static xiv x_norm(xv lo, xv hi) { return (xiv){nlo(lo), nhi(hi)}; }
static xiv x_full(void) { return (xiv){xs(-2), xs(2)}; }
static xiv x_point(int64_t v) { return (xiv){xf(v), xf(v)}; }
static xiv x_hull(xiv a, xiv b) { return (xiv){xmin(a.lo, b.lo), xmax(a.hi, b.hi)}; }
static xiv x_add(xiv a, xiv b) { return x_norm(xadd(a.lo, b.lo, -1), xadd(a.hi, b.hi, 1)); }
static xiv x_neg(xiv a) { return x_norm(xneg(a.hi), xneg(a.lo)); }
static xiv x_corners(xv c0, xv c1, xv c2, xv c3) {
  return x_norm(xmin(xmin(c0, c1), xmin(c2, c3)), xmax(xmax(c0, c1), xmax(c2, c3)));
}
static xiv x_mul(xiv a, xiv b) {
  return x_corners(xmul(a.lo, b.lo), xmul(a.lo, b.hi), xmul(a.hi, b.lo), xmul(a.hi, b.hi));
}
static xiv x_scale(xiv a, int64_t k) { return x_mul(a, x_point(k)); }
static xiv x_square(xiv a) {
  if (xsign(a.lo) >= 0) return x_norm(xmul(a.lo, a.lo), xmul(a.hi, a.hi));
  if (xsign(a.hi) <= 0) return x_norm(xmul(a.hi, a.hi), xmul(a.lo, a.lo));
  return x_norm(xf(0), xmax(xmul(a.lo, a.lo), xmul(a.hi, a.hi)));
}

/* floor(x / d) for d within [p1, p2], 1 <= p1 */
static xiv x_div_pos(xiv x, xv p1, xv p2) {
  return x_corners(xdiv(x.lo, p1), xdiv(x.lo, p2), xdiv(x.hi, p1), xdiv(x.hi, p2));
}

static xiv x_floordiv(xiv x, xiv d) {
  bool have = false;
  xiv r = x_full();
  if (xsign(d.hi) > 0) {
    r = x_div_pos(x, nlo(xmax(d.lo, xf(1))), d.hi);
    have = true;
  }
  if (xsign(d.lo) < 0) {
    /* floor(x / d) == floor(-x / -d) */
    xiv n = x_div_pos(x_neg(x), nlo(xmax(xneg(d.hi), xf(1))), nhi(xneg(d.lo)));
    r = have ? x_hull(r, n) : n;
    have = true;
  }
  return have ? r : x_full(); /* d == 0 always: never evaluates */
}

static xiv x_floormod(xiv x, xiv d) {
  /* one constant divisor and x within one period: x - k * q */
  if (d.lo.s == 0 && d.hi.s == 0 && d.lo.v == d.hi.v && d.lo.v != 0 && x.lo.s == 0 && x.hi.s == 0) {
    int64_t k = d.lo.v, q1, q2, kq;
    if (rx_i64_floordiv(x.lo.v, k, &q1) && rx_i64_floordiv(x.hi.v, k, &q2) && q1 == q2 &&
        rx_i64_mul(k, q1, &kq)) {
      int64_t a, b;
      if (rx_i64_sub(x.lo.v, kq, &a) && rx_i64_sub(x.hi.v, kq, &b)) return (xiv){xf(a), xf(b)};
    }
  }
  bool have = false;
  xiv r = x_full();
  if (xsign(d.hi) > 0) {
    /* [0, d - 1], and at most x when x >= 0 */
    xiv p = x_norm(xf(0), xadd(d.hi, xf(-1), 1));
    if (xsign(x.lo) >= 0) p.hi = xmin(p.hi, x.hi);
    r = p;
    have = true;
  }
  if (xsign(d.lo) < 0) {
    xiv n = x_norm(xadd(d.lo, xf(1), -1), xf(0));
    if (xsign(x.hi) <= 0) n.lo = xmax(n.lo, x.lo);
    r = have ? x_hull(r, n) : n;
    have = true;
  }
  return have ? r : x_full();
}

/* ---- modular sets ---- */

static modset ms_norm(int64_t m, int64_t r) {
  if (m < 0) return (modset){1, 0};
  if (m == 0) return (modset){0, r};
  int64_t rr;
  rx_i64_floormod(r, m, &rr);
  return (modset){m, rr};
}
static const modset MS_NONE = {1, 0};

static int64_t gcd_i(int64_t a, int64_t b) {
  uint64_t g = rx_u64_gcd(rx_u64_abs(a), rx_u64_abs(b));
  return g > (uint64_t)INT64_MAX ? -1 : (int64_t)g; /* -1: not representable */
}

static modset ms_add(modset a, modset b, int64_t kb) {
  int64_t m, r, mb, rb;
  if (!rx_i64_mul(b.m, kb, &mb) || !rx_i64_mul(b.r, kb, &rb)) return MS_NONE;
  m = gcd_i(a.m, mb);
  if (m < 0 || !rx_i64_add(a.r, rb, &r)) return MS_NONE;
  return ms_norm(m, r);
}

static modset ms_mul(modset a, modset b) {
  int64_t x, y, z, r;
  if (!rx_i64_mul(a.m, b.m, &x) || !rx_i64_mul(a.m, b.r, &y) || !rx_i64_mul(b.m, a.r, &z) ||
      !rx_i64_mul(a.r, b.r, &r))
    return MS_NONE;
  int64_t m = gcd_i(gcd_i(x, y), z);
  return m < 0 ? MS_NONE : ms_norm(m, r);
}

static modset ms_union(modset a, modset b) {
  int64_t d;
  if (!rx_i64_sub(a.r, b.r, &d)) return MS_NONE;
  int64_t m = gcd_i(gcd_i(a.m, b.m), d);
  return m < 0 ? MS_NONE : ms_norm(m, a.r);
}

static modset ms_of(rx_analyzer *an, const rx_expr *e);

static modset ms_rec(rx_analyzer *an, const rx_expr *e) {
  switch (e->kind) {
  case RX_EXPR_CONST:
    return (modset){0, e->value};
  case RX_EXPR_ADD:
    return ms_add(ms_of(an, e->a), ms_of(an, e->b), 1);
  case RX_EXPR_SUB:
    return ms_add(ms_of(an, e->a), ms_of(an, e->b), -1);
  case RX_EXPR_MUL:
    return ms_mul(ms_of(an, e->a), ms_of(an, e->b));
  case RX_EXPR_FLOORDIV:
    if (e->b->kind == RX_EXPR_CONST && e->b->value > 0) {
      modset a = ms_of(an, e->a);
      int64_t k = e->b->value, q;
      if (a.m == 0) return rx_i64_floordiv(a.r, k, &q) ? (modset){0, q} : MS_NONE;
      /* m*x + r with k | m: (m / k) * x + r // k */
      if (a.m % k == 0) return ms_norm(a.m / k, a.r / k);
    }
    return MS_NONE;
  case RX_EXPR_FLOORMOD:
    if (e->b->kind == RX_EXPR_CONST && e->b->value > 0) {
      modset a = ms_of(an, e->a);
      int64_t k = e->b->value, r;
      if (a.m == 0 || a.m % k == 0) return rx_i64_floormod(a.r, k, &r) ? (modset){0, r} : MS_NONE;
      return ms_norm(gcd_i(a.m, k), a.r); /* x % k == x (mod gcd(m, k)) */
    }
    return MS_NONE;
  case RX_EXPR_MIN:
  case RX_EXPR_MAX:
    return ms_union(ms_of(an, e->a), ms_of(an, e->b));
  case RX_EXPR_SELECT:
    return ms_union(ms_of(an, e->b), ms_of(an, e->c));
  default:
    return MS_NONE;
  }
}

static modset ms_of(rx_analyzer *an, const rx_expr *e) {
  modset s = ms_rec(an, e);
  info f = info_get(an, e);
  if (f.mod > 1 && (s.m == 1 || (s.m > 1 && f.mod > s.m && f.mod % s.m == 0)))
    s = (modset){f.mod, f.rem};
  return s;
}

int64_t sym_analyzer_divisor(rx_analyzer *an, const rx_expr *e) {
  modset s = ms_of(an, sym_expr_simplify(an->ctx, e));
  if (s.m == 0) {
    if (s.r == INT64_MIN) return INT64_C(1) << 62;
    return s.r < 0 ? -s.r : s.r; /* 0: e is 0, every c divides it */
  }
  int64_t g = gcd_i(s.m, s.r);
  return g > 0 ? g : 1;
}

/* ---- bounds ---- */

static xiv bnd(rx_analyzer *an, const rx_expr *e);
static rx_tribool prove_rec(rx_analyzer *an, const rx_expr *c);

static bool cache_get(rx_analyzer *an, const rx_expr *e, xiv *out) {
  if (!an->bcap) return false;
  size_t i = hslot(e, an->bcap);
  for (; an->bkeys[i]; i = (i + 1) & (an->bcap - 1))
    if (an->bkeys[i] == e) {
      if (an->bgen[i] != an->gen) return false;
      *out = to_x(an->bvals[i]);
      return true;
    }
  return false;
}

static void cache_put(rx_analyzer *an, const rx_expr *e, xiv v) {
  if ((an->bcount + 1) * 2 > an->bcap) {
    /* rebuild: drop stale entries, grow when still half full */
    size_t live = 0;
    for (size_t i = 0; i < an->bcap; i++) live += an->bkeys[i] && an->bgen[i] == an->gen;
    size_t cap = an->bcap ? an->bcap : 256;
    while ((live + 1) * 4 > cap) cap *= 2;
    const rx_expr **keys = base_calloc(cap, sizeof *keys);
    rx_interval *vals = base_calloc(cap, sizeof *vals);
    uint32_t *gens = base_calloc(cap, sizeof *gens);
    for (size_t i = 0; i < an->bcap; i++) {
      if (!an->bkeys[i] || an->bgen[i] != an->gen) continue;
      size_t j = hslot(an->bkeys[i], cap);
      while (keys[j]) j = (j + 1) & (cap - 1);
      keys[j] = an->bkeys[i];
      vals[j] = an->bvals[i];
      gens[j] = an->bgen[i];
    }
    free(an->bkeys);
    free(an->bvals);
    free(an->bgen);
    an->bkeys = keys;
    an->bvals = vals;
    an->bgen = gens;
    an->bcap = cap;
    an->bcount = live;
  }
  size_t i = hslot(e, an->bcap);
  while (an->bkeys[i] && an->bkeys[i] != e) i = (i + 1) & (an->bcap - 1);
  if (!an->bkeys[i]) an->bcount++;
  an->bkeys[i] = e;
  an->bvals[i] = from_x(v);
  an->bgen[i] = an->gen;
}

static xiv tri_iv(rx_tribool t) {
  return t == RX_TRUE ? x_point(1) : t == RX_FALSE ? x_point(0) : (xiv){xf(0), xf(1)};
}

static xiv bnd_rec(rx_analyzer *an, const rx_expr *e) {
  switch (e->kind) {
  case RX_EXPR_CONST:
    return x_point(e->value);
  case RX_EXPR_ADD: {
    xiv r = bnd(an, e->b);
    for (e = e->a; e->kind == RX_EXPR_ADD; e = e->a) r = x_add(r, bnd(an, e->b));
    return x_add(r, bnd(an, e));
  }
  case RX_EXPR_SUB:
    return x_add(bnd(an, e->a), x_neg(bnd(an, e->b)));
  case RX_EXPR_MUL:
    if (e->b->kind == RX_EXPR_CONST) return x_scale(bnd(an, e->a), e->b->value);
    if (e->a == e->b) return x_square(bnd(an, e->a));
    return x_mul(bnd(an, e->a), bnd(an, e->b));
  case RX_EXPR_FLOORDIV:
    return x_floordiv(bnd(an, e->a), bnd(an, e->b));
  case RX_EXPR_FLOORMOD:
    return x_floormod(bnd(an, e->a), bnd(an, e->b));
  case RX_EXPR_MIN:
  case RX_EXPR_MAX: {
    xiv a = bnd(an, e->a), b = bnd(an, e->b);
    if (e->kind == RX_EXPR_MIN) return (xiv){xmin(a.lo, b.lo), xmin(a.hi, b.hi)};
    return (xiv){xmax(a.lo, b.lo), xmax(a.hi, b.hi)};
  }
  case RX_EXPR_SELECT: {
    rx_tribool t = prove_rec(an, e->a);
    if (t == RX_TRUE) return bnd(an, e->b);
    if (t == RX_FALSE) return bnd(an, e->c);
    xiv a = bnd(an, e->b), b = bnd(an, e->c);
    const rx_expr *c = e->a;
    if ((c->kind == RX_EXPR_LT || c->kind == RX_EXPR_LE) && c->a == e->b && c->b == e->c)
      return (xiv){xmin(a.lo, b.lo), xmin(a.hi, b.hi)}; /* select(x < y, x, y) == min(x, y) */
    if ((c->kind == RX_EXPR_LT || c->kind == RX_EXPR_LE) && c->a == e->c && c->b == e->b)
      return (xiv){xmax(a.lo, b.lo), xmax(a.hi, b.hi)}; /* select(x < y, y, x) == max(x, y) */
    return x_hull(a, b);
  }
  default: /* a condition (sym_expr_kind_is_bool) is 0 or 1 as it is proven */
    return sym_expr_kind_is_bool(e->kind) ? tri_iv(prove_rec(an, e)) : x_full();
  }
}

/* the bounds of e, narrowed by the facts about e itself */
static xiv bnd(rx_analyzer *an, const rx_expr *e) {
  xiv r;
  if (e->kind == RX_EXPR_CONST) return x_point(e->value);
  if (cache_get(an, e, &r)) return r;
  if (an->depth > MAX_DEPTH) return x_full();
  an->depth++;
  r = bnd_rec(an, e);
  an->depth--;
  info f = info_get(an, e);
  r.lo = xmax(r.lo, xlo(f.lo));
  r.hi = xmin(r.hi, xhi(f.hi));
  modset s = ms_of(an, e);
  if (s.m == 0) {
    r.lo = xmax(r.lo, xf(s.r));
    r.hi = xmin(r.hi, xf(s.r));
  } else if (s.m > 1) {
    /* round the bounds inwards to the residue */
    int64_t t, u;
    if (r.lo.s == 0 && rx_i64_sub(s.r, r.lo.v, &t) && rx_i64_floormod(t, s.m, &u) &&
        rx_i64_add(r.lo.v, u, &t))
      r.lo = xf(t);
    if (r.hi.s == 0 && rx_i64_sub(r.hi.v, s.r, &t) && rx_i64_floormod(t, s.m, &u) &&
        rx_i64_sub(r.hi.v, u, &t))
      r.hi = xf(t);
  }
  cache_put(an, e, r);
  return r;
}

rx_interval sym_analyzer_bounds(rx_analyzer *an, const rx_expr *e) {
  return from_x(bnd(an, sym_expr_simplify(an->ctx, e)));
}

/* ---- proving ---- */

static xiv poly_bnd(rx_analyzer *an, const rx_term *t, size_t n, int64_t c) {
  xiv r = x_point(c);
  for (size_t i = 0; i < n; i++) r = x_add(r, x_scale(bnd(an, t[i].m), t[i].k));
  return r;
}

static bool sum_divmul(rx_analyzer *an, rx_poly *p);

/* For the prover: k * (X // c) with c | k becomes (k / c) * X minus (k / c) * r, where r is
 * X % c when that is known (sum_divmul), else the atom X % c (bounded by [0, c - 1]). */
static void divmul_all(rx_analyzer *an, rx_poly *p) {
  sym_poly_norm(p);
  while (!p->ovf && sum_divmul(an, p)) sym_poly_norm(p);
  for (size_t i = 0, n = p->n; i < n && !p->ovf; i++) {
    const rx_expr *m = p->t[i].m;
    int64_t k = p->t[i].k, nk;
    if (m->kind != RX_EXPR_FLOORDIV || m->b->kind != RX_EXPR_CONST || m->b->value <= 1 ||
        k % m->b->value != 0 || !rx_i64_mul(k / m->b->value, -1, &nk))
      continue;
    p->t[i].k = 0;
    sym_poly_add_expr(p, m->a, k / m->b->value);
    sym_poly_add_expr(p, sym_expr_floormod(an->ctx, m->a, m->b), nk);
  }
  sym_poly_norm(p);
}

/* q * (d) - p * (r) as a normalized poly */
static bool combine(rx_analyzer *an, rx_poly *out, const rx_term *dt, size_t dn, int64_t dc,
                    int64_t q, const rel *r, int64_t p) {
  int64_t v;
  sym_poly_init(out);
  for (size_t i = 0; i < dn && !out->ovf; i++) {
    if (!rx_i64_mul(dt[i].k, q, &v))
      out->ovf = true;
    else
      sym_poly_push(out, dt[i].m, v);
  }
  for (size_t i = 0; i < r->n && !out->ovf; i++) {
    if (!rx_i64_mul(r->t[i].k, -p, &v))
      out->ovf = true;
    else
      sym_poly_push(out, r->t[i].m, v);
  }
  int64_t a, b;
  if (!rx_i64_mul(dc, q, &a) || !rx_i64_mul(r->c, -p, &b) || !rx_i64_add(a, b, &out->c))
    out->ovf = true;
  divmul_all(an, out);
  return !out->ovf;
}

/* multipliers (p, q) > 0 that cancel a term shared by d and r with the same sign */
static size_t lambdas(const rx_term *dt, size_t dn, const rel *r, int64_t *p, int64_t *q,
                      size_t max) {
  size_t n = 0;
  p[n] = q[n] = 1;
  n++;
  for (size_t i = 0; i < r->n && n < max; i++)
    for (size_t j = 0; j < dn; j++) {
      if (dt[j].m != r->t[i].m) continue;
      int64_t kd = dt[j].k, kr = r->t[i].k;
      if ((kd > 0) != (kr > 0) || kd == INT64_MIN || kr == INT64_MIN) break;
      int64_t g = gcd_i(kd, kr), pp = (kd < 0 ? -kd : kd) / g, qq = (kr < 0 ? -kr : kr) / g;
      bool dup = false;
      for (size_t k = 0; k < n; k++) dup |= p[k] == pp && q[k] == qq;
      if (!dup) p[n] = pp, q[n] = qq, n++;
      break;
    }
  return n;
}

/* sum of t + c <= 0 for every value satisfying the facts */
static bool le0(rx_analyzer *an, const rx_term *t, size_t n, int64_t c) {
  if (xsign(poly_bnd(an, t, n, c).hi) <= 0) return true;
  if (n == 0 || an->depth > MAX_DEPTH) return false;
  an->depth++;
  bool ok = false;
  size_t nr = an->rels.len;
  int64_t p1[4], q1[4], p2[4], q2[4];
  for (size_t i = 0; i < nr && !ok; i++) {
    const rel *r1 = &an->rels.data[i];
    size_t nl = lambdas(t, n, r1, p1, q1, 4);
    for (size_t a = 0; a < nl && !ok; a++) {
      rx_poly e1;
      if (combine(an, &e1, t, n, c, q1[a], r1, p1[a])) {
        ok = xsign(poly_bnd(an, e1.t, e1.n, e1.c).hi) <= 0;
        for (size_t j = i + 1; j < nr && j < MAX_PAIRS && !ok; j++) {
          const rel *r2 = &an->rels.data[j];
          size_t nl2 = lambdas(e1.t, e1.n, r2, p2, q2, 4);
          for (size_t b = 0; b < nl2 && !ok; b++) {
            rx_poly e2;
            if (combine(an, &e2, e1.t, e1.n, e1.c, q2[b], r2, p2[b]))
              ok = xsign(poly_bnd(an, e2.t, e2.n, e2.c).hi) <= 0;
            sym_poly_free(&e2);
          }
        }
      }
      sym_poly_free(&e1);
    }
  }
  an->depth--;
  return ok;
}

/* p := k * p + c (in place); false on overflow */
static bool affine(rx_poly *p, int64_t k, int64_t c) {
  for (size_t i = 0; i < p->n; i++)
    if (!rx_i64_mul(p->t[i].k, k, &p->t[i].k)) return false;
  return rx_i64_mul(p->c, k, &p->c) && rx_i64_add(p->c, c, &p->c);
}

/* d <= 0 */
static rx_tribool tri_le0(rx_analyzer *an, rx_poly *d) {
  if (le0(an, d->t, d->n, d->c)) return RX_TRUE;
  /* d >= 1, i.e. 1 - d <= 0 */
  if (!affine(d, -1, 1)) return RX_UNKNOWN;
  bool f = le0(an, d->t, d->n, d->c);
  affine(d, -1, 1); /* back (cannot overflow: it did not before) */
  return f ? RX_FALSE : RX_UNKNOWN;
}

static rx_tribool tri_eq0(rx_analyzer *an, rx_poly *d) {
  rx_tribool a = tri_le0(an, d);
  if (a == RX_FALSE) return RX_FALSE; /* d >= 1 */
  if (!affine(d, -1, 0)) return RX_UNKNOWN;
  rx_tribool b = tri_le0(an, d); /* -d <= 0 */
  affine(d, -1, 0);
  if (b == RX_FALSE) return RX_FALSE; /* d <= -1 */
  if (a == RX_TRUE && b == RX_TRUE) return RX_TRUE;
  /* residues: d == m * x + r with r not a multiple of m */
  modset s = {0, d->c};
  for (size_t i = 0; i < d->n; i++) s = ms_add(s, ms_of(an, d->t[i].m), d->t[i].k);
  if ((s.m == 0 && s.r != 0) || (s.m > 1 && s.r != 0)) return RX_FALSE;
  return RX_UNKNOWN;
}

static bool is_fact(const rx_analyzer *an, const rx_expr *e) {
  for (size_t i = an->facts.len; i-- > 0;)
    if (an->facts.data[i] == e) return true;
  return false;
}

static rx_tribool tri_not(rx_tribool t) {
  return t == RX_TRUE ? RX_FALSE : t == RX_FALSE ? RX_TRUE : RX_UNKNOWN;
}

static rx_tribool prove_cmp(rx_analyzer *an, rx_expr_kind k, const rx_expr *a, const rx_expr *b) {
  if (k == RX_EXPR_GT || k == RX_EXPR_GE) {
    const rx_expr *t = a;
    a = b;
    b = t;
    k = k == RX_EXPR_GT ? RX_EXPR_LT : RX_EXPR_LE;
  }
  rx_poly d;
  sym_poly_init(&d);
  sym_poly_add_expr(&d, a, 1);
  sym_poly_add_expr(&d, b, -1);
  if (k == RX_EXPR_LT && !rx_i64_add(d.c, 1, &d.c)) d.ovf = true;
  divmul_all(an, &d);
  rx_tribool r = RX_UNKNOWN;
  if (!d.ovf) {
    if (k == RX_EXPR_LT || k == RX_EXPR_LE)
      r = tri_le0(an, &d);
    else
      r = k == RX_EXPR_EQ ? tri_eq0(an, &d) : tri_not(tri_eq0(an, &d));
  }
  sym_poly_free(&d);
  return r;
}

static rx_tribool prove_rec(rx_analyzer *an, const rx_expr *c) {
  if (c->kind == RX_EXPR_CONST) return c->value != 0 ? RX_TRUE : RX_FALSE;
  if (is_fact(an, c)) return RX_TRUE;
  switch (c->kind) {
  case RX_EXPR_AND:
  case RX_EXPR_OR: {
    rx_tribool a = prove_rec(an, c->a), b = prove_rec(an, c->b);
    if (c->kind == RX_EXPR_AND) {
      if (a == RX_FALSE || b == RX_FALSE) return RX_FALSE;
      return a == RX_TRUE && b == RX_TRUE ? RX_TRUE : RX_UNKNOWN;
    }
    if (a == RX_TRUE || b == RX_TRUE) return RX_TRUE;
    return a == RX_FALSE && b == RX_FALSE ? RX_FALSE : RX_UNKNOWN;
  }
  case RX_EXPR_NOT:
    return tri_not(prove_rec(an, c->a));
  case RX_EXPR_EQ:
  case RX_EXPR_NE:
  case RX_EXPR_LT:
  case RX_EXPR_LE:
  case RX_EXPR_GT:
  case RX_EXPR_GE: {
    const rx_expr *n = sym_expr_canon_not(an->ctx, c);
    if (n && is_fact(an, n)) return RX_FALSE;
    return prove_cmp(an, c->kind, c->a, c->b);
  }
  default: {
    /* a number as a condition: c != 0 */
    xiv b = bnd(an, c);
    if (xsign(b.lo) > 0 || xsign(b.hi) < 0) return RX_TRUE;
    if (xsign(b.lo) == 0 && xsign(b.hi) == 0) return RX_FALSE;
    return RX_UNKNOWN;
  }
  }
}

rx_tribool sym_analyzer_prove(rx_analyzer *an, const rx_expr *cond) {
  return prove_rec(an, sym_expr_simplify(an->ctx, cond));
}

/* ---- adding facts ---- */

static void narrow(rx_analyzer *an, const rx_expr *e, int64_t lo, int64_t hi) {
  info f = info_get(an, e);
  if (lo <= f.lo && hi >= f.hi) return;
  if (lo > f.lo) f.lo = lo;
  if (hi < f.hi) f.hi = hi;
  info_set(an, e, f);
}

/* k * m + c <= 0 */
static void bound_term(rx_analyzer *an, const rx_expr *m, int64_t k, int64_t c) {
  int64_t v;
  if (c == INT64_MIN || k == INT64_MIN) return;
  if (k > 0) {
    rx_i64_floordiv(-c, k, &v); /* m <= floor(-c / k) */
    narrow(an, m, INT64_MIN, v);
  } else {
    rx_i64_floordiv(-c, -k, &v); /* m >= ceil(c / -k) == -floor(-c / -k) */
    if (v != INT64_MIN) narrow(an, m, -v, INT64_MAX);
  }
}

static void set_mod(rx_analyzer *an, const rx_expr *x, int64_t k, int64_t r) {
  info f = info_get(an, x);
  int64_t rr;
  rx_i64_floormod(r, k, &rr);
  if (f.mod > 1) {
    int64_t t;
    if (k % f.mod == 0) {
      rx_i64_floormod(rr, f.mod, &t);
      if (t != f.rem) an->contra = true;
    } else if (f.mod % k == 0) {
      rx_i64_floormod(f.rem, k, &t);
      if (t != rr) an->contra = true;
      return; /* the known residue is finer */
    } else if (f.mod > k) {
      return;
    }
  }
  f.mod = k;
  f.rem = rr;
  info_set(an, x, f);
}

/* sum <= 0 (d normalized) */
static void add_le0(rx_analyzer *an, const rx_poly *d) {
  if (d->n == 0) {
    if (d->c > 0) an->contra = true;
    return;
  }
  if (d->n == 1) {
    bound_term(an, d->t[0].m, d->t[0].k, d->c);
    return;
  }
  rel r = {base_malloc(d->n * sizeof *r.t), d->n, d->c};
  memcpy(r.t, d->t, d->n * sizeof *r.t);
  RX_VEC_PUSH(&an->rels, r);
  undo u = {U_REL, NULL, INFO_NONE};
  RX_VEC_PUSH(&an->log, u);
  an->gen++;
  /* each term from the lower bounds of the others */
  for (size_t i = 0; i < d->n; i++) {
    xiv rest = x_point(d->c);
    for (size_t j = 0; j < d->n; j++)
      if (j != i) rest = x_add(rest, x_scale(bnd(an, d->t[j].m), d->t[j].k));
    if (rest.lo.s == 0) bound_term(an, d->t[i].m, d->t[i].k, rest.lo.v);
  }
}

static void add_fact(rx_analyzer *an, const rx_expr *f) {
  if (f->kind == RX_EXPR_CONST) {
    if (f->value == 0) an->contra = true;
    return;
  }
  if (f->kind == RX_EXPR_AND) {
    add_fact(an, f->a);
    add_fact(an, f->b);
    return;
  }
  RX_VEC_PUSH(&an->facts, f);
  undo u = {U_FACT, NULL, INFO_NONE};
  RX_VEC_PUSH(&an->log, u);
  an->gen++;
  rx_expr_kind k = f->kind;
  if (k < RX_EXPR_EQ || k > RX_EXPR_GE) return;
  const rx_expr *a = f->a, *b = f->b;
  if (k == RX_EXPR_GT || k == RX_EXPR_GE) {
    a = f->b;
    b = f->a;
    k = k == RX_EXPR_GT ? RX_EXPR_LT : RX_EXPR_LE;
  }
  rx_poly d;
  sym_poly_init(&d);
  sym_poly_add_expr(&d, a, 1);
  sym_poly_add_expr(&d, b, -1);
  if (k == RX_EXPR_LT && !rx_i64_add(d.c, 1, &d.c)) d.ovf = true;
  sym_poly_norm(&d);
  if (!d.ovf) {
    if (k == RX_EXPR_LT || k == RX_EXPR_LE) {
      add_le0(an, &d);
    } else if (k == RX_EXPR_EQ) {
      add_le0(an, &d);
      if (affine(&d, -1, 0)) add_le0(an, &d);
      /* x % k == r */
      if (a->kind == RX_EXPR_FLOORMOD && a->b->kind == RX_EXPR_CONST && a->b->value > 1 &&
          b->kind == RX_EXPR_CONST)
        set_mod(an, a->a, a->b->value, b->value);
    } else if (d.n == 1 && (d.t[0].k == 1 || d.t[0].k == -1) && d.c != INT64_MIN) {
      /* m != v: step over v at either end of m's range */
      int64_t v = d.t[0].k == 1 ? -d.c : d.c;
      info fi = info_get(an, d.t[0].m);
      if (fi.lo == v && v != INT64_MAX)
        narrow(an, d.t[0].m, v + 1, INT64_MAX);
      else if (fi.hi == v && v != INT64_MIN)
        narrow(an, d.t[0].m, INT64_MIN, v - 1);
    }
  }
  sym_poly_free(&d);
}

bool sym_analyzer_assume(rx_analyzer *an, const rx_expr *fact) {
  const rx_expr *f = sym_expr_simplify(an->ctx, fact);
  rx_tribool t = prove_rec(an, f);
  if (t == RX_FALSE) return false;
  if (t == RX_TRUE) return true; /* nothing new */
  an->contra = false;
  add_fact(an, f);
  return !an->contra;
}

void sym_analyzer_bind_range(rx_analyzer *an, const rx_expr *var, const rx_expr *lo,
                             const rx_expr *extent) {
  rx_expr_ctx *ctx = an->ctx;
  sym_analyzer_assume(an, sym_expr_cmp(ctx, RX_EXPR_LE, lo, var));
  sym_analyzer_assume(an, sym_expr_cmp(ctx, RX_EXPR_LT, var, sym_expr_add(ctx, lo, extent)));
}

/* ---- simplification with facts ---- */

static const rx_expr *asimp(rx_analyzer *an, const rx_expr *e);

static bool point(xiv b, int64_t *v) {
  if (b.lo.s || b.hi.s || b.lo.v != b.hi.v) return false;
  *v = b.lo.v;
  return true;
}

/* a poly as an expression; NULL on overflow */
static const rx_expr *poly_expr(rx_analyzer *an, rx_poly *p) {
  return p->ovf ? NULL : sym_poly_build(an->ctx, p);
}

/* The terms of p that are known multiples of g go to s (when s is not NULL), the others to r,
 * with p's constant. Returns whether any term went to s. */
static bool split_terms(rx_analyzer *an, const rx_poly *p, int64_t g, rx_poly *s, rx_poly *r) {
  bool any = false;
  r->c = p->c;
  for (size_t i = 0; i < p->n; i++) {
    int64_t d = sym_analyzer_divisor(an, p->t[i].m), kd;
    bool exact = d == 0 || (rx_i64_mul(d, p->t[i].k, &kd) && kd % g == 0);
    any |= exact;
    if (exact && s)
      sym_poly_push(s, p->t[i].m, p->t[i].k);
    else if (!exact)
      sym_poly_push(r, p->t[i].m, p->t[i].k);
  }
  return any;
}

/* x // k, k > 1, x canonical: terms that are multiples of k split off exactly */
static const rx_expr *div_rule(rx_analyzer *an, const rx_expr *x, int64_t k) {
  rx_expr_ctx *ctx = an->ctx;
  const rx_expr *res = NULL;
  rx_poly p, s, r;
  sym_poly_init(&p);
  sym_poly_init(&s);
  sym_poly_init(&r);
  sym_poly_add_expr(&p, x, 1);
  sym_poly_norm(&p);
  if (p.ovf) goto done;
  split_terms(an, &p, k, &s, &r);
  xiv b = poly_bnd(an, r.t, r.n, r.c);
  if (b.lo.s || b.hi.s) goto done;
  int64_t q1, q2;
  rx_i64_floordiv(b.lo.v, k, &q1);
  rx_i64_floordiv(b.hi.v, k, &q2);
  if (q1 != q2) goto done;
  /* x // k == s // k + q when r stays within [q*k, q*k + k) */
  const rx_expr *se = poly_expr(an, &s);
  if (se)
    res = sym_expr_add(ctx, sym_expr_floordiv(ctx, se, sym_expr_const(ctx, k)),
                       sym_expr_const(ctx, q1));
done:
  sym_poly_free(&p);
  sym_poly_free(&s);
  sym_poly_free(&r);
  return res;
}

/* x % k, k > 1, x canonical */
static const rx_expr *mod_rule(rx_analyzer *an, const rx_expr *x, int64_t k) {
  rx_expr_ctx *ctx = an->ctx;
  modset ms = ms_of(an, x);
  int64_t v;
  if (ms.m == 0 || (ms.m % k == 0)) {
    rx_i64_floormod(ms.r, k, &v);
    return sym_expr_const(ctx, v);
  }
  const rx_expr *res = NULL;
  rx_poly p, r;
  sym_poly_init(&p);
  sym_poly_init(&r);
  sym_poly_add_expr(&p, x, 1);
  sym_poly_norm(&p);
  if (p.ovf) goto done;
  bool dropped = split_terms(an, &p, k, NULL, &r);
  xiv b = poly_bnd(an, r.t, r.n, r.c);
  int64_t q1, q2, kq;
  if (!b.lo.s && !b.hi.s && rx_i64_floordiv(b.lo.v, k, &q1) && rx_i64_floordiv(b.hi.v, k, &q2) &&
      q1 == q2 && rx_i64_mul(q1, k, &kq) && rx_i64_sub(r.c, kq, &r.c)) {
    res = poly_expr(an, &r); /* r within one period: r - q * k */
  } else if (dropped) {
    const rx_expr *re = poly_expr(an, &r);
    if (re) res = sym_expr_floormod(ctx, re, sym_expr_const(ctx, k));
  }
done:
  sym_poly_free(&p);
  sym_poly_free(&r);
  return res;
}

/* x // k or x % k (k > 1, x canonical) when the rules above fail: for a divisor g of k (largest
 * first), the terms that are multiples of g form s and the rest r; where r stays within one
 * period [q g, q g + g), x // k == (s + q g) // k and x % k == (s + q g) % k + (r - q g), since
 * s + q g is a multiple of g and g divides k. Splits (8 u + w) // 16 into (8 u) // 16 for w in
 * 0..8, which the exact rules leave whole. */
static const rx_expr *split_rule(rx_analyzer *an, const rx_expr *x, int64_t k, bool is_div) {
  rx_expr_ctx *ctx = an->ctx;
  const rx_expr *res = NULL;
  rx_poly p;
  sym_poly_init(&p);
  sym_poly_add_expr(&p, x, 1);
  sym_poly_norm(&p);
  /* candidates: gcd(k, a term's known multiple), each a divisor of k below it */
  int64_t cand[8];
  int nc = 0;
  for (size_t i = 0; !p.ovf && i < p.n && nc < 8; i++) {
    int64_t d = sym_analyzer_divisor(an, p.t[i].m), kd, a, b;
    if (d == 0 || !rx_i64_mul(d, p.t[i].k, &kd)) continue;
    for (a = k, b = kd < 0 ? -kd : kd; b;) {
      int64_t t = a % b;
      a = b;
      b = t;
    }
    if (a > 1 && a < k) cand[nc++] = a;
  }
  for (int ci = 0; !p.ovf && !res && ci < nc; ci++) {
    int64_t g = cand[ci];
    rx_poly s, r;
    sym_poly_init(&s);
    sym_poly_init(&r);
    split_terms(an, &p, g, &s, &r);
    xiv b = poly_bnd(an, r.t, r.n, r.c);
    int64_t q1, q2, qg;
    if (s.n && r.n && !b.lo.s && !b.hi.s && rx_i64_floordiv(b.lo.v, g, &q1) &&
        rx_i64_floordiv(b.hi.v, g, &q2) && q1 == q2 && rx_i64_mul(q1, g, &qg) &&
        rx_i64_sub(r.c, qg, &r.c)) {
      s.c = qg;
      const rx_expr *se = poly_expr(an, &s), *re = poly_expr(an, &r);
      if (se && re)
        res = is_div ? sym_expr_floordiv(ctx, se, sym_expr_const(ctx, k))
                     : sym_expr_add(ctx, sym_expr_floormod(ctx, se, sym_expr_const(ctx, k)), re);
    }
    sym_poly_free(&s);
    sym_poly_free(&r);
  }
  sym_poly_free(&p);
  return res;
}

/* k * (X // c) with c | k and X % c known == r: (k / c) * (X - r) */
static bool sum_divmul(rx_analyzer *an, rx_poly *p) {
  for (size_t i = 0; i < p->n; i++) {
    const rx_expr *m = p->t[i].m;
    if (m->kind != RX_EXPR_FLOORDIV || m->b->kind != RX_EXPR_CONST || m->b->value <= 1) continue;
    int64_t c = m->b->value, k = p->t[i].k, r;
    if (k % c != 0) continue;
    modset ms = ms_of(an, m->a);
    if (ms.m != 0 && ms.m % c != 0) continue;
    rx_i64_floormod(ms.r, c, &r);
    p->t[i].k = 0;
    sym_poly_add_expr(p, m->a, k / c);
    int64_t t;
    if (!rx_i64_mul(r, k / c, &t) || !rx_i64_sub(p->c, t, &p->c)) p->ovf = true;
    return true;
  }
  return false;
}

static const rx_expr *asimp_minmax(rx_analyzer *an, const rx_expr *e) {
  RX_VEC(const rx_expr *) ops = {0};
  RX_VEC(const rx_expr *) stack = {0};
  RX_VEC_PUSH(&stack, e);
  while (stack.len) {
    const rx_expr *x = stack.data[--stack.len];
    if (x->kind == e->kind) {
      RX_VEC_PUSH(&stack, x->b);
      RX_VEC_PUSH(&stack, x->a);
    } else {
      RX_VEC_PUSH(&ops, asimp(an, x));
    }
  }
  free(stack.data);
  bool is_min = e->kind == RX_EXPR_MIN;
  const rx_expr *r = NULL;
  bool *drop = base_calloc(ops.len, sizeof *drop);
  for (size_t i = 0; i < ops.len; i++) {
    for (size_t j = 0; j < ops.len && !drop[i]; j++) {
      if (j == i || drop[j]) continue;
      /* min: operand i goes when some other operand j <= i */
      const rx_expr *c = is_min ? sym_expr_cmp(an->ctx, RX_EXPR_LE, ops.data[j], ops.data[i])
                                : sym_expr_cmp(an->ctx, RX_EXPR_LE, ops.data[i], ops.data[j]);
      drop[i] = prove_rec(an, c) == RX_TRUE;
    }
    if (!drop[i]) r = r ? sym_expr_make(an->ctx, e->kind, r, ops.data[i], NULL) : ops.data[i];
  }
  free(drop);
  free(ops.data);
  return r;
}

static const rx_expr *asimp_sum(rx_analyzer *an, const rx_expr *e) {
  rx_expr_ctx *ctx = an->ctx;
  rx_poly p, q;
  sym_poly_init(&p);
  sym_poly_init(&q);
  sym_poly_add_expr(&p, e, 1);
  sym_poly_norm(&p);
  const rx_expr *res = e;
  if (p.ovf) goto done;
  q.c = p.c;
  for (size_t i = 0; i < p.n; i++) {
    /* simplify each atom of the mono */
    const rx_expr *m = p.t[i].m, *nm = NULL;
    RX_VEC(const rx_expr *) atoms = {0};
    while (m->kind == RX_EXPR_MUL && m->b->kind != RX_EXPR_CONST && m->a->kind != RX_EXPR_CONST) {
      RX_VEC_PUSH(&atoms, m->b);
      m = m->a;
    }
    RX_VEC_PUSH(&atoms, m);
    for (size_t j = 0; j < atoms.len; j++) {
      const rx_expr *a = asimp(an, atoms.data[j]);
      nm = nm ? sym_expr_mul(ctx, nm, a) : a;
    }
    free(atoms.data);
    sym_poly_add_expr(&q, nm, p.t[i].k);
  }
  sym_poly_norm(&q);
  while (!q.ovf && sum_divmul(an, &q)) sym_poly_norm(&q);
  const rx_expr *r = poly_expr(an, &q);
  if (r) res = r;
done:
  sym_poly_free(&p);
  sym_poly_free(&q);
  return res;
}

static const rx_expr *asimp_node(rx_analyzer *an, const rx_expr *e) {
  rx_expr_ctx *ctx = an->ctx;
  switch (e->kind) {
  case RX_EXPR_CONST:
  case RX_EXPR_VAR:
    return e;
  case RX_EXPR_ADD:
  case RX_EXPR_SUB: /* (only where canonicalization gave up on overflow) */
  case RX_EXPR_MUL:
    return asimp_sum(an, e);
  case RX_EXPR_FLOORDIV:
  case RX_EXPR_FLOORMOD: {
    bool is_div = e->kind == RX_EXPR_FLOORDIV;
    const rx_expr *a = asimp(an, e->a), *b = asimp(an, e->b);
    const rx_expr *r = sym_expr_make(ctx, e->kind, a, b, NULL);
    if (r->kind != e->kind) return r;
    a = r->a;
    b = r->b;
    if (b->kind == RX_EXPR_CONST && b->value > 1) {
      const rx_expr *s = is_div ? div_rule(an, a, b->value) : mod_rule(an, a, b->value);
      if (!s) s = split_rule(an, a, b->value, is_div);
      return s ? s : r;
    }
    if (b->kind != RX_EXPR_CONST &&
        prove_rec(an, sym_expr_cmp(ctx, RX_EXPR_LE, sym_expr_const(ctx, 0), a)) == RX_TRUE &&
        prove_rec(an, sym_expr_cmp(ctx, RX_EXPR_LT, a, b)) == RX_TRUE)
      return is_div ? sym_expr_const(ctx, 0) : a; /* 0 <= a < b */
    return r;
  }
  case RX_EXPR_MIN:
  case RX_EXPR_MAX:
    return asimp_minmax(an, e);
  case RX_EXPR_SELECT: {
    const rx_expr *c = asimp(an, e->a);
    rx_tribool t = prove_rec(an, c);
    if (t == RX_TRUE) return asimp(an, e->b);
    if (t == RX_FALSE) return asimp(an, e->c);
    /* each branch under its condition (it is only evaluated then) */
    size_t mk = sym_analyzer_mark(an);
    bool live = sym_analyzer_assume(an, c);
    const rx_expr *tb = live ? asimp(an, e->b) : e->b;
    sym_analyzer_reset(an, mk);
    if (!live) return asimp(an, e->c);
    const rx_expr *nc = sym_expr_not(ctx, c);
    live = sym_analyzer_assume(an, nc);
    const rx_expr *fb = live ? asimp(an, e->c) : e->c;
    sym_analyzer_reset(an, mk);
    if (!live) return tb;
    return sym_expr_select(ctx, c, tb, fb);
  }
  default: {
    /* comparisons and logic */
    RX_ASSERT(e->kind >= RX_EXPR_EQ && e->kind <= RX_EXPR_NOT);
    const rx_expr *a = asimp(an, e->a);
    const rx_expr *b = e->b ? asimp(an, e->b) : NULL;
    const rx_expr *r = sym_expr_make(ctx, e->kind, a, b, NULL);
    rx_tribool t = prove_rec(an, r);
    return t == RX_UNKNOWN ? r : sym_expr_const(ctx, t == RX_TRUE);
  }
  }
}

static const rx_expr *asimp(rx_analyzer *an, const rx_expr *e) {
  if (e->kind == RX_EXPR_CONST) return e;
  int64_t v;
  if (point(bnd(an, e), &v)) return sym_expr_const(an->ctx, v);
  const rx_expr *r = asimp_node(an, e);
  if (r != e && r->kind != RX_EXPR_CONST && point(bnd(an, r), &v)) r = sym_expr_const(an->ctx, v);
  return r;
}

const rx_expr *sym_analyzer_simplify(rx_analyzer *an, const rx_expr *e) {
  e = sym_expr_simplify(an->ctx, e);
  for (int i = 0; i < MAX_ROUNDS; i++) {
    const rx_expr *r = asimp(an, e);
    if (r == e) break;
    e = r;
  }
  return e;
}
