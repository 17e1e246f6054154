/* The parser of the text format (docs/text-format.md): tokens to graph functions, tensor
 * programs and extern declarations. This file: the item loop, graph functions and what both
 * levels share (literals, dtypes, symbolic expressions, struct info; declared in ir/parse.h);
 * ir/parse_tensor.c: tensor programs and extern declarations.
 *
 * Errors: every error is reported with the place and what was expected, then abandons the
 * item (function) being parsed: the parser longjmps back to the item loop, skips to the next
 * line that starts an item, and goes on. All memory, temporaries included, is in the module
 * arena, so abandoning a half-built item leaks nothing. Calls of tensor programs, externs
 * and graph functions are resolved after the whole text is parsed (forward references). */
#include "parse.h"

#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const keywords[] = {
    "graph_fn",    "tensor_fn",   "extern_fn",  "impure",  "where",  "dataflow", "return",
    "if",          "else",        "out",        "for",     "in",     "reduce",   "init",
    "update",      "let",         "alloc",      "barrier", "global", "shared",   "local",
    "call_tensor", "call_extern", "match_cast", "prim",    "const",  "true",     "false",
};
bool ir_text_is_reserved(const char *s, size_t n) {
  for (size_t k = 0; k < RX_ARRAY_LEN(keywords); k++)
    if (strlen(keywords[k]) == n && !memcmp(s, keywords[k], n)) return true;
  rx_dtype dt;
  return ir_dtype_parse(s, n, &dt) && dt != RX_DTYPE_UNKNOWN;
}
bool ir_parse_is_keyword(const rx_tok *t) {
  return t->kind == RX_TOK_IDENT && ir_text_is_reserved(t->loc.src->text + t->loc.offset, t->len);
}

void *ir_parse_grow(P *p, void *old, int n, int *cap, size_t size) {
  int c = *cap ? *cap * 2 : 8;
  void *d = ir_module_alloc(p->m, size * (size_t)c);
  if (n) memcpy(d, old, size * (size_t)n);
  *cap = c;
  return d;
}

/* ---- errors ---- */

_Noreturn void ir_parse_fail_at(P *p, rx_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  base_diag_vreport(p->diag, RX_DIAG_ERROR, loc, fmt, ap);
  va_end(ap);
  longjmp(*p->jb, 1);
}

/* Where a missing token belongs: at the end of the previous token when the found one starts a
 * new line (or is the end of the file). */
static rx_loc miss_loc(P *p, const char **found) {
  rx_tok *t = cur(p);
  *found = ir_tok_describe(p->m, t);
  if ((t->nl || t->kind == RX_TOK_EOF) && p->i > 0) {
    rx_tok *prev = &p->t[p->i - 1];
    rx_loc l = prev->loc;
    l.col += prev->len;
    l.offset += prev->len;
    if (t->kind != RX_TOK_EOF) *found = "end of line";
    return l;
  }
  return t->loc;
}

_Noreturn void ir_parse_fail_expected(P *p, const char *what) {
  const char *found;
  rx_loc l = miss_loc(p, &found);
  ir_parse_fail_at(p, l, "expected %s, found %s", what, found);
}

void ir_parse_expect(P *p, rx_tok_kind k, const char *what) {
  if (!accept(p, k)) ir_parse_fail_expected(p, what);
}

void ir_parse_enter(P *p) {
  if (++p->depth > MAX_DEPTH)
    ir_parse_fail_at(p, cur(p)->loc, "nesting too deep (more than %d levels)", MAX_DEPTH);
}

/* A binding or statement ends at ';', '}', a newline or the end of the file. */
void ir_parse_end_stmt(P *p, const char *after) {
  rx_tok *t = cur(p);
  if (accept(p, RX_TOK_SEMI)) {
    while (accept(p, RX_TOK_SEMI)) {
    }
    return;
  }
  if (t->kind == RX_TOK_RBRACE || t->kind == RX_TOK_EOF || t->nl) return;
  ir_parse_fail_at(p, t->loc, "expected end of line after %s, found %s", after,
                   ir_tok_describe(p->m, t));
}

/* A name being defined (not a keyword). */
const char *ir_parse_def_name(P *p, const char *what) {
  rx_tok *t = cur(p);
  if (t->kind != RX_TOK_IDENT) ir_parse_fail_expected(p, what);
  if (ir_parse_is_keyword(t))
    ir_parse_fail_at(p, t->loc, "expected %s, found keyword %s", what, ir_tok_describe(p->m, t));
  next(p);
  return tok_text(p, t);
}

int64_t ir_parse_int_value(P *p, const rx_tok *t, bool negative) {
  if (t->overflow || t->u > (negative ? (UINT64_C(1) << 63) : (uint64_t)INT64_MAX))
    ir_parse_fail_at(p, t->loc, "integer literal '%s%.*s' does not fit in 64 bits",
                     negative ? "-" : "", (int)(t->len > 40 ? 40 : t->len),
                     t->loc.src->text + t->loc.offset);
  if (negative) return t->u == (UINT64_C(1) << 63) ? INT64_MIN : -(int64_t)t->u;
  return (int64_t)t->u;
}

/* An integer literal, optionally negative. */
int64_t ir_parse_int_lit(P *p, const char *what) {
  bool neg = accept(p, RX_TOK_MINUS);
  if (!is(p, RX_TOK_INT)) ir_parse_fail_expected(p, what);
  int64_t v = ir_parse_int_value(p, cur(p), neg);
  next(p);
  return v;
}

/* A number (integer or float literal, optionally negative; true/false as 1/0 when allowed).
 * An integer (or bool) literal's exact value goes to *iv too, and *is_int is set. */
static double num_lit_exact(P *p, bool bools, int64_t *iv, bool *is_int) {
  *is_int = true;
  *iv = 1;
  if (bools && accept_kw(p, "true")) return 1;
  *iv = 0;
  if (bools && accept_kw(p, "false")) return 0;
  bool neg = accept(p, RX_TOK_MINUS);
  rx_tok *t = cur(p);
  double v;
  if (t->kind == RX_TOK_FLOAT) {
    v = neg ? -t->f : t->f;
    *is_int = false;
  } else if (t->kind == RX_TOK_INT) {
    *iv = ir_parse_int_value(p, t, neg);
    v = (double)*iv;
  } else {
    ir_parse_fail_expected(p, "a number");
  }
  next(p);
  return v;
}

static double num_lit(P *p, bool bools) {
  int64_t iv;
  bool is_int;
  return num_lit_exact(p, bools, &iv, &is_int);
}

typedef AVEC(double) dvec;
typedef AVEC(int64_t) ivec;

/* The next value of a constant: its double in *v, its exact integer in *iv (*all_int cleared
 * by a float literal). */
static void const_value(P *p, dvec *v, ivec *iv, bool *all_int) {
  int64_t i;
  bool is_int;
  APUSH(p, v, num_lit_exact(p, true, &i, &is_int));
  APUSH(p, iv, i);
  *all_int = *all_int && is_int;
}

rx_dtype ir_parse_dtype_of(P *p, const rx_tok *t, bool *ok) {
  rx_dtype dt = RX_DTYPE_UNKNOWN;
  *ok = t->kind == RX_TOK_IDENT && ir_dtype_parse(t->loc.src->text + t->loc.offset, t->len, &dt);
  return dt;
}

/* " f32 f16 ...": every dtype's text name, from the table (messages) */
#define DT_NAME_(e, n, b, f, sg) " " n
static const char dtype_names[] = RX_DTYPES(DT_NAME_);
#undef DT_NAME_

rx_dtype ir_parse_dtype(P *p, bool allow_any) {
  bool ok;
  rx_dtype dt = ir_parse_dtype_of(p, cur(p), &ok);
  if (!ok || (!allow_any && dt == RX_DTYPE_UNKNOWN)) {
    if (cur(p)->kind == RX_TOK_IDENT)
      ir_parse_fail_at(p, cur(p)->loc, "unknown dtype %s: expected one of%s%s",
                       ir_tok_describe(p->m, cur(p)), dtype_names, allow_any ? " any" : "");
    ir_parse_fail_expected(p, "a dtype");
  }
  next(p);
  return dt;
}

/* ---- symbolic expressions ---- */

static const rx_expr *sym_primary(P *p) {
  rx_tok *t = cur(p);
  rx_expr_ctx *c = p->m->ctx;
  if (t->kind == RX_TOK_INT) {
    int64_t v = ir_parse_int_value(p, t, false);
    next(p);
    return sym_expr_const(c, v);
  }
  if (t->kind == RX_TOK_LPAREN) {
    next(p);
    p->nest++;
    const rx_expr *e = ir_parse_sym(p);
    ir_parse_expect(p, RX_TOK_RPAREN, "')' to close '('");
    p->nest--;
    return e;
  }
  if (t->kind != RX_TOK_IDENT) ir_parse_fail_expected(p, "a symbolic expression");
  if (accept_kw(p, "true")) return sym_expr_const(c, 1);
  if (accept_kw(p, "false")) return sym_expr_const(c, 0);
  if (ir_parse_is_keyword(t))
    ir_parse_fail_at(p, t->loc, "expected a symbolic expression, found keyword %s",
                     ir_tok_describe(p->m, t));
  if (ahead(p, 1)->kind == RX_TOK_LPAREN) {
    int arity = tok_is_kw(t, "select") ? 3 : (tok_is_kw(t, "min") || tok_is_kw(t, "max")) ? 2 : 0;
    if (!arity)
      ir_parse_fail_at(p, t->loc,
                       "unknown function %s in a symbolic expression: expected min, max or select",
                       ir_tok_describe(p->m, t));
    next(p);
    next(p);
    p->nest++;
    const rx_expr *a[3];
    for (int k = 0; k < arity; k++) {
      if (k) ir_parse_expect(p, RX_TOK_COMMA, "',' between arguments");
      a[k] = ir_parse_sym(p);
    }
    ir_parse_expect(p, RX_TOK_RPAREN, "')' after arguments");
    p->nest--;
    if (arity == 3) return sym_expr_select(c, a[0], a[1], a[2]);
    return tok_is_kw(t, "min") ? sym_expr_min(c, a[0], a[1]) : sym_expr_max(c, a[0], a[1]);
  }
  next(p);
  return sym_expr_var(c, tok_text(p, t));
}

static const rx_expr *sym_unary(P *p) {
  if (!is(p, RX_TOK_MINUS)) return sym_primary(p);
  next(p);
  if (is(p, RX_TOK_INT)) {
    int64_t v = ir_parse_int_value(p, cur(p), true);
    next(p);
    return sym_expr_const(p->m->ctx, v);
  }
  ir_parse_enter(p);
  const rx_expr *e = sym_expr_neg(p->m->ctx, sym_unary(p));
  leave(p);
  return e;
}

static const rx_expr *sym_mul(P *p) {
  const rx_expr *a = sym_unary(p);
  for (int k = 0; op_here(p); k++) {
    rx_expr_kind op;
    if (is(p, RX_TOK_STAR))
      op = RX_EXPR_MUL;
    else if (is(p, RX_TOK_SLASHSLASH))
      op = RX_EXPR_FLOORDIV;
    else if (is(p, RX_TOK_PERCENT))
      op = RX_EXPR_FLOORMOD;
    else if (is(p, RX_TOK_SLASH))
      ir_parse_fail_at(p, cur(p)->loc,
                       "'/' is not an integer operator: use '//' for floor division");
    else
      break;
    if (k > MAX_CHAIN) ir_parse_fail_at(p, cur(p)->loc, "expression too long");
    next(p);
    a = sym_expr_make(p->m->ctx, op, a, sym_unary(p), NULL);
  }
  return a;
}

static const rx_expr *sym_add(P *p) {
  const rx_expr *a = sym_mul(p);
  for (int k = 0; op_here(p) && (is(p, RX_TOK_PLUS) || is(p, RX_TOK_MINUS)); k++) {
    bool plus = is(p, RX_TOK_PLUS);
    if (k > MAX_CHAIN) ir_parse_fail_at(p, cur(p)->loc, "expression too long");
    next(p);
    const rx_expr *b = sym_mul(p);
    a = plus ? sym_expr_add(p->m->ctx, a, b) : sym_expr_sub(p->m->ctx, a, b);
  }
  return a;
}

bool ir_parse_cmp_tok(rx_tok_kind k, rx_expr_kind *ek, rx_binop *bo) {
  static const struct {
    rx_tok_kind tok;
    rx_expr_kind e;
    rx_binop b;
  } cmps[] = {
      {RX_TOK_EQ, RX_EXPR_EQ, RX_BINOP_EQ}, {RX_TOK_NE, RX_EXPR_NE, RX_BINOP_NE},
      {RX_TOK_LT, RX_EXPR_LT, RX_BINOP_LT}, {RX_TOK_LE, RX_EXPR_LE, RX_BINOP_LE},
      {RX_TOK_GT, RX_EXPR_GT, RX_BINOP_GT}, {RX_TOK_GE, RX_EXPR_GE, RX_BINOP_GE},
  };
  for (size_t i = 0; i < RX_ARRAY_LEN(cmps); i++) {
    if (cmps[i].tok == k) {
      if (ek) *ek = cmps[i].e;
      if (bo) *bo = cmps[i].b;
      return true;
    }
  }
  return false;
}

static const rx_expr *sym_cmp(P *p) {
  const rx_expr *a = sym_add(p);
  rx_expr_kind k;
  for (int n = 0; op_here(p) && ir_parse_cmp_tok(cur(p)->kind, &k, NULL); n++) {
    if (n > MAX_CHAIN) ir_parse_fail_at(p, cur(p)->loc, "expression too long");
    next(p);
    a = sym_expr_cmp(p->m->ctx, k, a, sym_add(p));
  }
  return a;
}

static const rx_expr *sym_not(P *p) {
  if (!is(p, RX_TOK_BANG)) return sym_cmp(p);
  next(p);
  ir_parse_enter(p);
  const rx_expr *e = sym_expr_not(p->m->ctx, sym_not(p));
  leave(p);
  return e;
}

static const rx_expr *sym_and(P *p) {
  const rx_expr *a = sym_not(p);
  for (int k = 0; op_here(p) && is(p, RX_TOK_ANDAND); k++) {
    if (k > MAX_CHAIN) ir_parse_fail_at(p, cur(p)->loc, "expression too long");
    next(p);
    a = sym_expr_and(p->m->ctx, a, sym_not(p));
  }
  return a;
}

const rx_expr *ir_parse_sym(P *p) {
  ir_parse_enter(p);
  const rx_expr *a = sym_and(p);
  for (int k = 0; op_here(p) && is(p, RX_TOK_OROR); k++) {
    if (k > MAX_CHAIN) ir_parse_fail_at(p, cur(p)->loc, "expression too long");
    next(p);
    a = sym_expr_or(p->m->ctx, a, sym_and(p));
  }
  leave(p);
  return a;
}

/* `[e, e, ...]` after the '[' was consumed; returns the count. */
int ir_parse_sym_list(P *p, const rx_expr ***out, rx_tok_kind close, const char *what) {
  AVEC(const rx_expr *) v = {0};
  p->nest++;
  if (!accept(p, close)) {
    for (;;) {
      APUSH(p, &v, ir_parse_sym(p));
      if (accept(p, close)) break;
      if (!accept(p, RX_TOK_COMMA)) ir_parse_fail_expected(p, what);
      if (accept(p, close)) break;
    }
  }
  p->nest--;
  /* never NULL: an empty list (f32[]) is a known 0-d shape, not an unknown one */
  *out = v.d ? v.d : ir_module_alloc(p->m, sizeof *v.d);
  return v.n;
}

/* `where FACT, FACT` (optional) */
int ir_parse_facts(P *p, const rx_expr ***out, rx_loc **locs) {
  *out = NULL;
  *locs = NULL;
  if (!accept_kw(p, "where")) return 0;
  AVEC(const rx_expr *) v = {0};
  AVEC(rx_loc) l = {0};
  do {
    APUSH(p, &l, cur(p)->loc);
    APUSH(p, &v, ir_parse_sym(p));
  } while (accept(p, RX_TOK_COMMA));
  *out = v.d;
  *locs = l.d;
  return v.n;
}

/* ---- struct info ---- */

/* A placement needs a tensor whose shape is known (the lowering divides its dims). */
static void no_placement(P *p) {
  if (is(p, RX_TOK_AT))
    ir_parse_fail_at(p, cur(p)->loc,
                     "a placement ('@ mesh[...]') needs a tensor of known shape, like f32[n, 4]");
}

/* `@ m[R, S[1], P]` after a tensor struct info (ir.h, rx_sinfo.mesh); the mesh and the counts
 * are checked by the verifier, which sees the whole module. */
static const rx_sinfo *placement(P *p, const rx_sinfo *s) {
  if (!is(p, RX_TOK_IDENT) || ir_parse_is_keyword(cur(p)))
    ir_parse_fail_expected(p, "the name of a device mesh after '@'");
  const char *mesh = tok_text(p, cur(p));
  next(p);
  ir_parse_expect(p, RX_TOK_LBRACKET, "'[' and a placement per mesh axis (R, P or S[dim])");
  int place[IR_MESH_MAX_NDIM], n = 0;
  do {
    rx_tok *t = cur(p);
    int pl;
    if (accept_kw(p, "R")) {
      pl = IR_PLACE_R;
    } else if (accept_kw(p, "P")) {
      pl = IR_PLACE_P;
    } else if (accept_kw(p, "S")) {
      ir_parse_expect(p, RX_TOK_LBRACKET, "'[' and the sharded tensor dim after S");
      rx_tok *dt = cur(p);
      int64_t d = ir_parse_int_lit(p, "the sharded tensor dim (an integer) in S[dim]");
      if (d < 0 || d >= MAX_NDIM)
        ir_parse_fail_at(p, dt->loc, "sharded dim %lld out of range 0..%d", (long long)d,
                         MAX_NDIM - 1);
      ir_parse_expect(p, RX_TOK_RBRACKET, "']' after the dim of S[dim]");
      pl = (int)d;
    } else {
      ir_parse_fail_expected(p, "a placement: R (replicated), P (partial sums) or S[dim]");
    }
    if (n == IR_MESH_MAX_NDIM)
      ir_parse_fail_at(p, t->loc, "more than %d placements: a mesh has at most %d axes",
                       IR_MESH_MAX_NDIM, IR_MESH_MAX_NDIM);
    place[n++] = pl;
  } while (accept(p, RX_TOK_COMMA));
  ir_parse_expect(p, RX_TOK_RBRACKET, "',' or ']' after a placement");
  return ir_sinfo_placed(p->m, s, mesh, place, n);
}

static const rx_sinfo *sinfo_body(P *p) {
  rx_tok *t = cur(p);
  rx_module *m = p->m;
  if (t->kind == RX_TOK_LPAREN) {
    next(p);
    AVEC(const rx_sinfo *) f = {0};
    if (accept(p, RX_TOK_RPAREN)) return rx_sinfo_tuple(m, NULL, 0);
    const rx_sinfo *first = ir_parse_sinfo(p);
    if (accept(p, RX_TOK_RPAREN)) return first;
    APUSH(p, &f, first);
    ir_parse_expect(p, RX_TOK_COMMA, "',' or ')' in a tuple struct info");
    while (!accept(p, RX_TOK_RPAREN)) {
      APUSH(p, &f, ir_parse_sinfo(p));
      if (accept(p, RX_TOK_RPAREN)) break;
      ir_parse_expect(p, RX_TOK_COMMA, "',' or ')' in a tuple struct info");
    }
    return rx_sinfo_tuple(m, f.d, f.n);
  }
  if (t->kind != RX_TOK_IDENT) ir_parse_fail_expected(p, "struct info");
  if (accept_kw(p, "Object")) return rx_sinfo_object(m);
  if (accept_kw(p, "Shape")) {
    if (!accept(p, RX_TOK_LPAREN)) return rx_sinfo_shape(m, -1, NULL);
    const rx_sinfo *s;
    if (accept(p, RX_TOK_LBRACKET)) {
      const rx_expr **dims;
      int n = ir_parse_sym_list(p, &dims, RX_TOK_RBRACKET, "',' or ']' in a shape");
      s = rx_sinfo_shape(m, n, dims);
    } else if (accept_kw(p, "ndim")) {
      ir_parse_expect(p, RX_TOK_ASSIGN, "'=' after 'ndim'");
      rx_tok *nt = cur(p);
      int64_t nd = ir_parse_int_lit(p, "an integer rank");
      if (nd < 0 || nd > MAX_NDIM)
        ir_parse_fail_at(p, nt->loc, "rank %lld out of range 0..%d", (long long)nd, MAX_NDIM);
      s = rx_sinfo_shape(m, (int)nd, NULL);
    } else {
      ir_parse_fail_expected(p, "'[' or 'ndim=' in Shape(...)");
    }
    ir_parse_expect(p, RX_TOK_RPAREN, "')' to close Shape(");
    return s;
  }
  if (accept_kw(p, "Prim")) {
    ir_parse_expect(p, RX_TOK_LPAREN, "'(' after 'Prim'");
    rx_dtype dt = ir_parse_dtype(p, true);
    const rx_expr *v = NULL;
    if (accept(p, RX_TOK_COMMA)) v = ir_parse_sym(p);
    ir_parse_expect(p, RX_TOK_RPAREN, "')' to close Prim(");
    return rx_sinfo_prim(m, dt, v);
  }
  if (accept_kw(p, "Func")) {
    ir_parse_expect(p, RX_TOK_LPAREN, "'(' after 'Func'");
    AVEC(const rx_sinfo *) f = {0};
    while (!accept(p, RX_TOK_RPAREN)) {
      APUSH(p, &f, ir_parse_sinfo(p));
      if (accept(p, RX_TOK_RPAREN)) break;
      ir_parse_expect(p, RX_TOK_COMMA, "',' or ')' in Func(...)");
    }
    ir_parse_expect(p, RX_TOK_ARROW, "'->' and the result of a Func struct info");
    const rx_sinfo *ret = ir_parse_sinfo(p);
    return ir_sinfo_func(m, f.d, f.n, ret);
  }
  bool ok;
  rx_dtype dt = ir_parse_dtype_of(p, t, &ok);
  if (!ok) {
    if (ahead(p, 1)->kind == RX_TOK_LBRACKET)
      ir_parse_fail_at(p, t->loc, "unknown dtype %s: expected one of%s any", ir_tok_describe(m, t),
                       dtype_names);
    ir_parse_fail_expected(
        p, "struct info (a tensor like f32[n, 4], Shape, Prim, Object, Func or a tuple)");
  }
  next(p);
  ir_parse_expect(p, RX_TOK_LBRACKET, "'[' after the dtype of a tensor struct info");
  if (accept(p, RX_TOK_ELLIPSIS)) {
    ir_parse_expect(p, RX_TOK_RBRACKET, "']' after '...'");
    no_placement(p);
    return rx_sinfo_tensor(m, dt, -1, NULL);
  }
  if (is_kw(p, "ndim") && ahead(p, 1)->kind == RX_TOK_ASSIGN) {
    next(p);
    next(p);
    rx_tok *nt = cur(p);
    int64_t nd = ir_parse_int_lit(p, "an integer rank");
    if (nd < 0 || nd > MAX_NDIM)
      ir_parse_fail_at(p, nt->loc, "rank %lld out of range 0..%d", (long long)nd, MAX_NDIM);
    ir_parse_expect(p, RX_TOK_RBRACKET, "']' after the rank");
    no_placement(p);
    return rx_sinfo_tensor(m, dt, (int)nd, NULL);
  }
  const rx_expr **dims;
  int n = ir_parse_sym_list(p, &dims, RX_TOK_RBRACKET, "',' or ']' in a tensor shape");
  const rx_sinfo *s = rx_sinfo_tensor(m, dt, n, dims);
  if (is_kw(p, "ragged") && ahead(p, 1)->kind == RX_TOK_LPAREN) {
    /* `ragged(indptr, b)` (ir.h, rx_sinfo.ragged_by) */
    rx_loc rl = cur(p)->loc;
    next(p);
    next(p);
    if (n < 1) ir_parse_fail_at(p, rl, "a ragged tensor has a leading axis to pack its rows in");
    if (!is(p, RX_TOK_IDENT))
      ir_parse_fail_expected(p, "the name of the offsets (indptr) in ragged(...)");
    const char *by = tok_text(p, cur(p));
    next(p);
    ir_parse_expect(p, RX_TOK_COMMA, "',' and the number of rows in ragged(indptr, rows)");
    const rx_expr *rows = ir_parse_sym(p);
    ir_parse_expect(p, RX_TOK_RPAREN, "')' after ragged(indptr, rows)");
    s = ir_sinfo_ragged(m, s, by, rows);
  }
  return accept(p, RX_TOK_AT) ? placement(p, s) : s;
}

const rx_sinfo *ir_parse_sinfo(P *p) {
  ir_parse_enter(p);
  p->nest++;
  const rx_sinfo *s = sinfo_body(p);
  p->nest--;
  leave(p);
  return s;
}

/* ---- graph functions ---- */

/* Names are interned and unique within a function, so one hash lookup finds a name; the
 * index recorded when it was pushed on visible is still its place there if the entry there
 * has this name (a branch's scope pops visible, and later names reuse the slots). */
static rx_var *lookup_var(P *p, const char *name) {
  int k = base_ptrmap_get(&p->visible_at, name);
  if (k >= 0 && k < p->visible.n && p->visible.d[k]->name == name) return p->visible.d[k];
  return NULL;
}

static rx_var *define_var(P *p, const char *name, const rx_sinfo *s, rx_loc loc) {
  int k = base_ptrmap_get(&p->defined_at, name);
  if (k >= 0 && k < p->defined.n) {
    rx_var *o = p->defined.d[k];
    if (o->name == name) {
      base_diag_report(p->diag, RX_DIAG_ERROR, loc,
                       "duplicate name '%s': first defined at line %u, column %u", name,
                       o->loc.line, o->loc.col);
      base_diag_report(p->diag, RX_DIAG_NOTE, o->loc, "'%s' first defined here", name);
      longjmp(*p->jb, 1);
    }
  }
  rx_var *v = ir_var_new(p->m, name, s, loc);
  base_ptrmap_put(&p->defined_at, name, p->defined.n);
  base_ptrmap_put(&p->visible_at, name, p->visible.n);
  APUSH(p, &p->defined, v);
  APUSH(p, &p->visible, v);
  return v;
}

static rx_node *gexpr(P *p);

static bool is_graph_name(P *p, const char *name) {
  for (int k = 0; k < p->gnames.n; k++)
    if (p->gnames.d[k] == name) return true;
  return ir_module_graph_fn(p->m, name) != NULL;
}

/* Is the current token `IDENT =` (a named argument)? */
static bool at_named(P *p) { return is(p, RX_TOK_IDENT) && ahead(p, 1)->kind == RX_TOK_ASSIGN; }

/* Between arguments: ',' (consumed; returns false) or ')' (consumed; returns true). */
bool ir_parse_arg_sep(P *p) {
  if (accept(p, RX_TOK_RPAREN)) return true;
  if (!accept(p, RX_TOK_COMMA)) ir_parse_fail_expected(p, "',' or ')' after an argument");
  return accept(p, RX_TOK_RPAREN);
}

static void attr_value(P *p, rx_attr *a) {
  switch (a->kind) {
  case RX_ATTR_INT:
    a->i = ir_parse_int_lit(p, "an integer");
    return;
  case RX_ATTR_FLOAT:
    a->f = num_lit(p, false);
    return;
  case RX_ATTR_BOOL:
    if (accept_kw(p, "true"))
      a->i = 1;
    else if (accept_kw(p, "false"))
      a->i = 0;
    else
      ir_parse_fail_expected(p, "true or false");
    return;
  case RX_ATTR_STR:
    if (!is(p, RX_TOK_STRING)) ir_parse_fail_expected(p, "a string");
    a->s = cur(p)->s;
    next(p);
    return;
  case RX_ATTR_DTYPE:
    a->dtype = ir_parse_dtype(p, true);
    return;
  case RX_ATTR_INTS: {
    ir_parse_expect(p, RX_TOK_LBRACKET, "'[' to start a list of integers");
    AVEC(int64_t) v = {0};
    while (!accept(p, RX_TOK_RBRACKET)) {
      APUSH(p, &v, ir_parse_int_lit(p, "an integer"));
      if (accept(p, RX_TOK_RBRACKET)) break;
      ir_parse_expect(p, RX_TOK_COMMA, "',' or ']' in a list of integers");
    }
    a->ints = v.d;
    a->n = v.n;
    return;
  }
  case RX_ATTR_EXPRS: {
    ir_parse_expect(p, RX_TOK_LBRACKET, "'[' to start a list of symbolic expressions");
    a->n = ir_parse_sym_list(p, &a->exprs, RX_TOK_RBRACKET, "',' or ']' in a list");
    return;
  }
  }
}

static rx_node *op_call(P *p, const rx_op *op, rx_tok *name) {
  const ir_op_registry *ops = p->m->ops;
  rx_node *n = ir_node_new(p->m, RX_NODE_CALL, name->loc);
  n->op = op;
  AVEC(rx_node *) args = {0};
  rx_attr **slot = ir_module_alloc(p->m, sizeof *slot * (size_t)(ops->nattrs(op) + 1));
  int npos = 0;
  bool named = false;
  if (!accept(p, RX_TOK_RPAREN)) {
    for (;;) {
      int idx = -1;
      rx_tok *at = cur(p);
      if (at_named(p)) {
        for (int k = 0; k < ops->nattrs(op); k++)
          if (tok_is_kw(at, ops->attr(op, k)->name)) idx = k;
        if (idx < 0)
          ir_parse_fail_at(p, at->loc, "operator '%s' has no attribute %s", ops->name(op),
                           ir_tok_describe(p->m, at));
        if (slot[idx])
          ir_parse_fail_at(p, at->loc, "attribute '%s' given twice", ops->attr(op, idx)->name);
        next(p);
        next(p);
        named = true;
      } else if (named) {
        ir_parse_fail_at(p, at->loc, "positional argument after a named attribute");
      } else if (ops->max_args(op) < 0 || npos < ops->max_args(op)) {
        APUSH(p, &args, gexpr(p));
        npos++;
      } else {
        idx = npos - ops->max_args(op);
        if (idx >= ops->nattrs(op))
          ir_parse_fail_at(p, at->loc, "operator '%s' takes at most %d argument%s%s", ops->name(op),
                           ops->max_args(op), ops->max_args(op) == 1 ? "" : "s",
                           ops->nattrs(op) ? " and its attributes" : "");
        if (slot[idx])
          ir_parse_fail_at(p, at->loc, "attribute '%s' given twice", ops->attr(op, idx)->name);
        npos++;
      }
      if (idx >= 0) {
        rx_attr *a = ir_module_alloc(p->m, sizeof *a);
        a->name =
            ir_module_intern(p->m, ops->attr(op, idx)->name, strlen(ops->attr(op, idx)->name));
        a->kind = ops->attr(op, idx)->kind;
        a->loc = cur(p)->loc;
        attr_value(p, a);
        slot[idx] = a;
      }
      if (ir_parse_arg_sep(p)) break;
    }
  }
  if (args.n < ops->min_args(op))
    ir_parse_fail_at(p, name->loc, "operator '%s' expects at least %d argument%s, found %d",
                     ops->name(op), ops->min_args(op), ops->min_args(op) == 1 ? "" : "s", args.n);
  n->args = args.d;
  n->nargs = args.n;
  n->attrs = ir_module_alloc(p->m, sizeof *n->attrs * (size_t)(ops->nattrs(op) + 1));
  for (int k = 0; k < ops->nattrs(op); k++) {
    if (slot[k])
      n->attrs[n->nattrs++] = *slot[k];
    else if (ops->attr(op, k)->required)
      ir_parse_fail_at(p, name->loc, "operator '%s' requires attribute '%s'", ops->name(op),
                       ops->attr(op, k)->name);
  }
  return n;
}

/* call_tensor(PROG, args..., out=SINFO, dims=[...]) / call_extern(NAME, args..., out=SINFO,
 * dims=[...]): dims are the values of the callee's scalar parameters, in order. */
static rx_node *dps_call(P *p, bool tensor, rx_loc loc) {
  const char *what = tensor ? "call_tensor" : "call_extern";
  rx_node *n = ir_node_new(p->m, tensor ? RX_NODE_CALL_TENSOR : RX_NODE_CALL_EXTERN, loc);
  ir_parse_expect(p, RX_TOK_LPAREN, tensor ? "'(' after 'call_tensor'" : "'(' after 'call_extern'");
  if (is(p, RX_TOK_IDENT) && !ir_parse_is_keyword(cur(p)))
    n->callee = tok_text(p, cur(p));
  else if (!tensor && is(p, RX_TOK_STRING))
    n->callee = ir_module_intern(p->m, cur(p)->s, strlen(cur(p)->s));
  else
    ir_parse_fail_expected(p, tensor ? "the name of a tensor program"
                                     : "the name of an extern function");
  next(p);
  AVEC(rx_node *) args = {0};
  bool done = accept(p, RX_TOK_RPAREN);
  if (!done) ir_parse_expect(p, RX_TOK_COMMA, "',' or ')' after the callee");
  bool have_dims = false;
  while (!done) {
    rx_tok *at = cur(p);
    if (at_named(p)) {
      next(p);
      next(p);
      if (tok_is_kw(at, "out")) {
        if (n->out || n->fresh_out) ir_parse_fail_at(p, at->loc, "'out' given twice");
        /* beside inplace=: the outputs the program adds after the targets (ir.h, fresh_out) */
        if (n->inplace)
          n->fresh_out = ir_parse_sinfo(p);
        else
          n->out = ir_parse_sinfo(p);
      } else if (tensor && tok_is_kw(at, "inplace")) {
        if (n->inplace) ir_parse_fail_at(p, at->loc, "'inplace' given twice");
        n->inplace = gexpr(p);
        n->fresh_out = n->out; /* out= written first */
        n->out = NULL;
      } else if (tok_is_kw(at, "dims")) {
        if (have_dims) ir_parse_fail_at(p, at->loc, "'dims' given twice");
        have_dims = true;
        ir_parse_expect(p, RX_TOK_LBRACKET, "'[' after 'dims='");
        n->nextra = ir_parse_sym_list(p, &n->extra_dims, RX_TOK_RBRACKET, "',' or ']' in dims");
      } else {
        ir_parse_fail_at(p, at->loc, "%s has no argument %s: expected %s", what,
                         ir_tok_describe(p->m, at),
                         tensor ? "'out', 'inplace' or 'dims'" : "'out' or 'dims'");
      }
    } else {
      if (n->out || n->inplace || n->fresh_out || have_dims)
        ir_parse_fail_at(p, at->loc, "positional argument after a named argument");
      APUSH(p, &args, gexpr(p));
    }
    done = ir_parse_arg_sep(p);
  }
  /* a returning extern's result defaults to its declared one (checked when names resolve) */
  if (!n->out && !n->inplace && tensor)
    ir_parse_fail_at(p, loc, "call_tensor requires out=STRUCT_INFO or inplace=VARIABLE");
  n->args = args.d;
  n->nargs = args.n;
  APUSH(p, &p->unresolved, n);
  return n;
}

/* const(SINFO, [v, ...]) or const(SINFO, v) for a 0-d tensor */
static rx_node *const_node(P *p, rx_loc loc) {
  ir_parse_expect(p, RX_TOK_LPAREN, "'(' after 'const'");
  rx_tok *st = cur(p);
  const rx_sinfo *s = ir_parse_sinfo(p);
  uint64_t count = 1;
  bool ok = s->kind == RX_SINFO_TENSOR && s->shape && s->dtype != RX_DTYPE_UNKNOWN;
  for (int k = 0; ok && k < s->ndim; k++) {
    const rx_expr *d = s->shape[k];
    if (d->kind != RX_EXPR_CONST || d->value < 0 || d->value > (1 << 30))
      ok = false;
    else
      count *= (uint64_t)d->value;
    if (count > (UINT64_C(1) << 28)) ok = false;
  }
  if (!ok)
    ir_parse_fail_at(
        p, st->loc,
        "const needs a tensor struct info with a dtype and a static shape of at most 2^28 values");
  ir_parse_expect(p, RX_TOK_COMMA, "',' and the values of the constant");
  dvec v = {0};
  ivec iv = {0};
  bool all_int = true;
  if (accept(p, RX_TOK_LBRACKET)) {
    while (!accept(p, RX_TOK_RBRACKET)) {
      const_value(p, &v, &iv, &all_int);
      if (accept(p, RX_TOK_RBRACKET)) break;
      ir_parse_expect(p, RX_TOK_COMMA, "',' or ']' in the values of a constant");
    }
  } else {
    const_value(p, &v, &iv, &all_int);
  }
  if ((uint64_t)v.n != count)
    ir_parse_fail_at(p, st->loc, "const of %llu value%s has %d", (unsigned long long)count,
                     count == 1 ? "" : "s", v.n);
  ir_parse_expect(p, RX_TOK_RPAREN, "')' after the values of a constant");
  rx_node *n = ir_node_new(p->m, RX_NODE_CONST, loc);
  n->sinfo = s;
  n->data = v.d;
  n->count = (size_t)v.n;
  if (all_int && !ir_dtype_is_float(s->dtype)) n->idata = iv.d;
  return n;
}

/* prim(EXPR) or prim(DTYPE, EXPR); a float dtype takes a number */
static rx_node *prim_node(P *p, rx_loc loc) {
  ir_parse_expect(p, RX_TOK_LPAREN, "'(' after 'prim'");
  rx_dtype dt = RX_DTYPE_I64;
  bool ok;
  rx_dtype d2 = ir_parse_dtype_of(p, cur(p), &ok);
  if (ok && ahead(p, 1)->kind == RX_TOK_COMMA) {
    if (d2 == RX_DTYPE_UNKNOWN) ir_parse_fail_at(p, cur(p)->loc, "prim needs a known dtype");
    dt = d2;
    next(p);
    next(p);
  }
  rx_node *n;
  p->nest++;
  if (ir_dtype_is_float(dt))
    n = ir_node_float(p->m, dt, num_lit(p, false), loc);
  else
    n = ir_node_int(p->m, dt, ir_parse_sym(p), loc);
  p->nest--;
  ir_parse_expect(p, RX_TOK_RPAREN, "')' to close prim(");
  return n;
}

static rx_node *gprimary(P *p) {
  rx_tok *t = cur(p);
  rx_module *m = p->m;
  rx_loc loc = t->loc;
  if (t->kind == RX_TOK_INT || t->kind == RX_TOK_FLOAT || t->kind == RX_TOK_MINUS) {
    bool neg = accept(p, RX_TOK_MINUS);
    rx_tok *nt = cur(p);
    rx_node *n;
    if (nt->kind == RX_TOK_INT)
      n = ir_node_int(m, RX_DTYPE_I64, sym_expr_const(m->ctx, ir_parse_int_value(p, nt, neg)), loc);
    else if (nt->kind == RX_TOK_FLOAT)
      n = ir_node_float(m, RX_DTYPE_F32, neg ? -nt->f : nt->f, loc);
    else
      ir_parse_fail_expected(p, "a number after '-'");
    next(p);
    n->weak = true;
    return n;
  }
  if (t->kind == RX_TOK_LBRACKET) {
    next(p);
    rx_node *n = ir_node_new(m, RX_NODE_SHAPE, loc);
    n->ndims = ir_parse_sym_list(p, &n->dims, RX_TOK_RBRACKET, "',' or ']' in a shape");
    return n;
  }
  if (t->kind == RX_TOK_LPAREN) {
    next(p);
    AVEC(rx_node *) f = {0};
    if (!accept(p, RX_TOK_RPAREN)) {
      rx_node *first = gexpr(p);
      if (accept(p, RX_TOK_RPAREN)) return first;
      APUSH(p, &f, first);
      if (!accept(p, RX_TOK_COMMA)) ir_parse_fail_expected(p, "',' or ')' in a tuple");
      while (!accept(p, RX_TOK_RPAREN)) {
        APUSH(p, &f, gexpr(p));
        if (accept(p, RX_TOK_RPAREN)) break;
        if (!accept(p, RX_TOK_COMMA)) ir_parse_fail_expected(p, "',' or ')' in a tuple");
      }
    }
    rx_node *n = ir_node_new(m, RX_NODE_TUPLE, loc);
    n->args = f.d;
    n->nargs = f.n;
    return n;
  }
  if (t->kind != RX_TOK_IDENT) ir_parse_fail_expected(p, "an expression");
  if (accept_kw(p, "true") || accept_kw(p, "false")) {
    rx_node *n = ir_node_int(m, RX_DTYPE_BOOL, sym_expr_const(m->ctx, tok_is_kw(t, "true")), loc);
    n->weak = true;
    return n;
  }
  if (accept_kw(p, "prim")) return prim_node(p, loc);
  if (accept_kw(p, "const")) return const_node(p, loc);
  if (accept_kw(p, "call_tensor")) return dps_call(p, true, loc);
  if (accept_kw(p, "call_extern")) return dps_call(p, false, loc);
  if (is_kw(p, "match_cast") || is_kw(p, "if"))
    ir_parse_fail_at(p, loc, "%s is only allowed as the whole right side of a binding",
                     ir_tok_describe(m, t));
  /* `where` is also the op where(cond, a, b): a keyword only when no `(` follows */
  bool where_op = tok_is_kw(t, "where") && ahead(p, 1)->kind == RX_TOK_LPAREN;
  if (ir_parse_is_keyword(t) && !where_op)
    ir_parse_fail_at(p, loc, "expected an expression, found keyword %s", ir_tok_describe(m, t));
  const char *name = tok_text(p, t);
  next(p);
  if (accept(p, RX_TOK_LPAREN)) {
    if (is_graph_name(p, name)) {
      rx_node *n = ir_node_new(m, RX_NODE_CALL_GRAPH, loc);
      n->callee = name;
      AVEC(rx_node *) args = {0};
      if (!accept(p, RX_TOK_RPAREN)) {
        do APUSH(p, &args, gexpr(p));
        while (!ir_parse_arg_sep(p));
      }
      n->args = args.d;
      n->nargs = args.n;
      APUSH(p, &p->unresolved, n);
      return n;
    }
    if (!m->ops)
      ir_parse_fail_at(p, loc,
                       "operator '%s' in a module that knows no ops (made without an op registry)",
                       name);
    const rx_op *op = m->ops->lookup(name, strlen(name));
    if (!op) ir_parse_fail_at(p, loc, "unknown operator '%s'", name);
    return op_call(p, op, t);
  }
  rx_var *v = lookup_var(p, name);
  if (!v) ir_parse_fail_at(p, loc, "undefined variable '%s'", name);
  return ir_node_var(m, v, loc);
}

static rx_node *gexpr(P *p) {
  ir_parse_enter(p);
  p->nest++;
  rx_node *e = gprimary(p);
  for (int k = 0; is(p, RX_TOK_DOT); k++) {
    if (k > MAX_CHAIN) ir_parse_fail_at(p, cur(p)->loc, "expression too long");
    rx_loc loc = cur(p)->loc;
    next(p);
    if (!is(p, RX_TOK_INT)) ir_parse_fail_expected(p, "a field index after '.'");
    rx_tok *it = cur(p);
    if (it->overflow || it->u > 1000000) ir_parse_fail_at(p, it->loc, "field index too large");
    next(p);
    rx_node *g = ir_node_new(p->m, RX_NODE_GET_ITEM, loc);
    g->args = ir_module_alloc(p->m, sizeof *g->args);
    g->args[0] = e;
    g->nargs = 1;
    g->index = (int)it->u;
    e = g;
  }
  p->nest--;
  leave(p);
  return e;
}

static rx_binding *binding(P *p, bool in_dataflow);

/* An if branch: `{ BINDING... EXPR }` */
static rx_seq *branch(P *p) {
  rx_tok *open = cur(p);
  ir_parse_expect(p, RX_TOK_LBRACE, "'{' to start a branch");
  int mark = p->visible.n;
  rx_seq *s = ir_module_alloc(p->m, sizeof *s);
  rx_block *b = ir_module_alloc(p->m, sizeof *b);
  b->loc = cur(p)->loc;
  AVEC(rx_binding *) bs = {0};
  for (;;) {
    if (is(p, RX_TOK_EOF))
      ir_parse_fail_at(p, open->loc, "unterminated branch: expected its value and '}'");
    if (is(p, RX_TOK_IDENT) && !ir_parse_is_keyword(cur(p)) &&
        (ahead(p, 1)->kind == RX_TOK_ASSIGN || ahead(p, 1)->kind == RX_TOK_COLON)) {
      APUSH(p, &bs, binding(p, false));
      continue;
    }
    if (is(p, RX_TOK_RBRACE)) ir_parse_fail_expected(p, "the value of the branch before '}'");
    s->result = gexpr(p);
    ir_parse_end_stmt(p, "the value of a branch");
    ir_parse_expect(p, RX_TOK_RBRACE, "'}' after the value of a branch");
    break;
  }
  b->bindings = bs.d;
  b->nbindings = bs.n;
  if (bs.n) {
    s->blocks = ir_module_alloc(p->m, sizeof *s->blocks);
    s->blocks[0] = b;
    s->nblocks = 1;
  }
  p->visible.n = mark;
  return s;
}

static rx_binding *binding(P *p, bool in_dataflow) {
  rx_tok *nt = cur(p);
  rx_loc loc = nt->loc;
  const char *name = ir_parse_def_name(p, "a binding ('NAME = EXPR')");
  rx_binding *b = ir_module_alloc(p->m, sizeof *b);
  b->loc = loc;
  if (accept(p, RX_TOK_COLON)) b->annot = ir_parse_sinfo(p);
  ir_parse_expect(p, RX_TOK_ASSIGN, "'=' after the name of a binding");
  ir_parse_enter(p);
  rx_tok *vt = cur(p);
  if (accept_kw(p, "match_cast")) {
    ir_parse_expect(p, RX_TOK_LPAREN, "'(' after 'match_cast'");
    p->nest++;
    b->value = gexpr(p);
    ir_parse_expect(p, RX_TOK_COMMA, "',' and the struct info of match_cast");
    b->cast = ir_parse_sinfo(p);
    ir_parse_expect(p, RX_TOK_RPAREN, "')' to close match_cast(");
    p->nest--;
  } else if (is_kw(p, "if")) {
    if (in_dataflow) ir_parse_fail_at(p, vt->loc, "'if' is not allowed inside a dataflow block");
    next(p);
    rx_node *n = ir_node_new(p->m, RX_NODE_IF, vt->loc);
    n->cond = gexpr(p);
    n->then_seq = branch(p);
    if (!accept_kw(p, "else")) ir_parse_fail_expected(p, "'else' after the first branch of 'if'");
    n->else_seq = branch(p);
    b->value = n;
  } else {
    b->value = gexpr(p);
  }
  leave(p);
  ir_parse_end_stmt(p, "a binding");
  b->var = define_var(p, name, b->annot, loc);
  return b;
}

static rx_block *new_block(P *p, bool dataflow, rx_loc loc, rx_binding **bs, int n) {
  rx_block *b = ir_module_alloc(p->m, sizeof *b);
  b->dataflow = dataflow;
  b->loc = loc;
  b->bindings = bs;
  b->nbindings = n;
  return b;
}

static void graph_fn(P *p, rx_loc loc) {
  rx_graph_fn *f = ir_module_alloc(p->m, sizeof *f);
  f->loc = loc;
  f->name = ir_parse_def_name(p, "the name of the graph function");
  p->visible.n = p->defined.n = 0;
  ir_parse_expect(p, RX_TOK_LPAREN, "'(' to start the parameters");
  AVEC(rx_var *) params = {0};
  while (!accept(p, RX_TOK_RPAREN)) {
    rx_loc ploc = cur(p)->loc;
    const char *pn = ir_parse_def_name(p, "a parameter name");
    ir_parse_expect(p, RX_TOK_COLON, "':' and the struct info of the parameter");
    APUSH(p, &params, define_var(p, pn, ir_parse_sinfo(p), ploc));
    if (accept(p, RX_TOK_RPAREN)) break;
    ir_parse_expect(p, RX_TOK_COMMA, "',' or ')' after a parameter");
  }
  f->params = params.d;
  f->nparams = params.n;
  if (accept(p, RX_TOK_ARROW)) f->ret = ir_parse_sinfo(p);
  f->nfacts = ir_parse_facts(p, &f->facts, &f->fact_locs);
  rx_tok *open = cur(p);
  ir_parse_expect(p, RX_TOK_LBRACE, "'{' to start the body of the function");
  AVEC(rx_block *) blocks = {0};
  AVEC(rx_binding *) plain = {0};
  rx_loc plain_loc = cur(p)->loc;
  for (;;) {
    rx_tok *t = cur(p);
    if (t->kind == RX_TOK_EOF)
      ir_parse_fail_at(p, open->loc, "unterminated body of '%s': expected 'return' and '}'",
                       f->name);
    if (t->kind == RX_TOK_RBRACE) ir_parse_fail_at(p, t->loc, "expected 'return' before '}'");
    if (accept_kw(p, "dataflow")) {
      if (plain.n) APUSH(p, &blocks, new_block(p, false, plain_loc, plain.d, plain.n));
      plain.d = NULL;
      plain.n = plain.cap = 0;
      rx_tok *dopen = cur(p);
      ir_parse_expect(p, RX_TOK_LBRACE, "'{' after 'dataflow'");
      AVEC(rx_binding *) bs = {0};
      while (!accept(p, RX_TOK_RBRACE)) {
        if (is(p, RX_TOK_EOF))
          ir_parse_fail_at(p, dopen->loc, "unterminated dataflow block: expected '}'");
        APUSH(p, &bs, binding(p, true));
      }
      ir_parse_end_stmt(p, "a dataflow block");
      APUSH(p, &blocks, new_block(p, true, t->loc, bs.d, bs.n));
      plain_loc = cur(p)->loc;
      continue;
    }
    if (accept_kw(p, "return")) {
      f->body.result = gexpr(p);
      ir_parse_end_stmt(p, "the return value");
      ir_parse_expect(p, RX_TOK_RBRACE, "'}' after the return value");
      break;
    }
    if (t->kind != RX_TOK_IDENT || ir_parse_is_keyword(t))
      ir_parse_fail_expected(p, "a binding, 'dataflow' or 'return'");
    APUSH(p, &plain, binding(p, false));
  }
  if (plain.n) APUSH(p, &blocks, new_block(p, false, plain_loc, plain.d, plain.n));
  f->body.blocks = blocks.d;
  f->body.nblocks = blocks.n;
  rx_item it = {RX_ITEM_GRAPH, f};
  RX_VEC_PUSH(&p->m->items, it);
}

/* ---- items ---- */

static const char *item_name(const rx_item *it) {
  switch (it->kind) {
  case RX_ITEM_GRAPH:
    return ((rx_graph_fn *)it->fn)->name;
  case RX_ITEM_TENSOR:
    return ((rx_tensor_fn *)it->fn)->name;
  case RX_ITEM_EXTERN:
    return ((rx_extern_fn *)it->fn)->name;
  }
  return "";
}
static rx_loc item_loc(const rx_item *it) {
  switch (it->kind) {
  case RX_ITEM_GRAPH:
    return ((rx_graph_fn *)it->fn)->loc;
  case RX_ITEM_TENSOR:
    return ((rx_tensor_fn *)it->fn)->loc;
  case RX_ITEM_EXTERN:
    return ((rx_extern_fn *)it->fn)->loc;
  }
  return (rx_loc){0};
}

static bool is_item_start(const rx_tok *t) {
  return tok_is_kw(t, "graph_fn") || tok_is_kw(t, "tensor_fn") || tok_is_kw(t, "extern_fn") ||
         tok_is_kw(t, "impure");
}

/* `mesh m = [2, 2]` (ir.h, rx_mesh) */
static void mesh_decl(P *p, rx_loc loc) {
  rx_mesh me = {.name = tok_text(p, cur(p)), .loc = loc};
  next(p);
  next(p);
  ir_parse_expect(p, RX_TOK_LBRACKET, "'[' and the devices per axis of the mesh");
  do {
    rx_tok *t = cur(p);
    int64_t d = ir_parse_int_lit(p, "a number of devices (an integer) in the mesh shape");
    if (me.ndim == IR_MESH_MAX_NDIM)
      ir_parse_fail_at(p, t->loc, "mesh '%s' has more than %d axes", me.name, IR_MESH_MAX_NDIM);
    if (d < 1 || d > 65536)
      ir_parse_fail_at(p, t->loc, "mesh '%s': axis %d has %lld devices, expected 1..65536", me.name,
                       me.ndim, (long long)d);
    me.shape[me.ndim++] = d;
  } while (accept(p, RX_TOK_COMMA));
  ir_parse_expect(p, RX_TOK_RBRACKET, "',' or ']' in the mesh shape");
  const rx_mesh *old = ir_module_mesh(p->m, me.name);
  if (old)
    ir_parse_fail_at(p, loc, "redefinition of mesh '%s': first defined at line %u, column %u",
                     me.name, old->loc.line, old->loc.col);
  RX_VEC_PUSH(&p->m->meshes, me);
}

static bool is_mesh_start(P *p, int k) {
  return tok_is_kw(&p->t[k], "mesh") && k + 2 < p->n && p->t[k + 1].kind == RX_TOK_IDENT &&
         p->t[k + 2].kind == RX_TOK_ASSIGN;
}

static void item(P *p) {
  rx_tok *t = cur(p);
  rx_loc loc = t->loc;
  size_t before = p->m->items.len;
  if (is_mesh_start(p, p->i)) {
    next(p);
    mesh_decl(p, loc);
    rx_tok *after = &p->t[p->i];
    if (after->kind != RX_TOK_EOF && !after->nl)
      ir_parse_fail_at(p, after->loc, "expected end of line after the mesh, found %s",
                       ir_tok_describe(p->m, after));
    return;
  }
  if (accept_kw(p, "graph_fn")) {
    graph_fn(p, loc);
  } else if (accept_kw(p, "tensor_fn")) {
    ir_parse_tensor_fn(p, loc);
  } else if (accept_kw(p, "impure")) {
    if (!accept_kw(p, "extern_fn")) ir_parse_fail_expected(p, "'extern_fn' after 'impure'");
    ir_parse_extern_fn(p, loc, true);
  } else if (accept_kw(p, "extern_fn")) {
    ir_parse_extern_fn(p, loc, false);
  } else {
    ir_parse_fail_expected(p, "'graph_fn', 'tensor_fn', 'extern_fn' or 'mesh'");
  }
  rx_tok *after = &p->t[p->i]; /* raw: a lexical error there belongs to what follows */
  if (after->kind != RX_TOK_EOF && !after->nl)
    ir_parse_fail_at(p, after->loc, "expected end of line after the definition, found %s",
                     ir_tok_describe(p->m, after));
  /* the name must be new in the module */
  RX_ASSERT(p->m->items.len == before + 1);
  rx_item *it = &p->m->items.data[before];
  for (size_t k = 0; k < before; k++) {
    rx_item *o = &p->m->items.data[k];
    if (item_name(o) == item_name(it)) {
      p->m->items.len = before;
      rx_loc ol = item_loc(o);
      ir_parse_fail_at(p, item_loc(it), "redefinition of '%s': first defined at line %u, column %u",
                       item_name(it), ol.line, ol.col);
    }
  }
}

/* Parses one item; on an error skips to the next item. The recovery point lives here, not in
 * the caller, so no local of the caller is live across the longjmp. */
static void guarded_item(P *p) {
  jmp_buf jb;
  int start = p->i;
  size_t nitems = p->m->items.len;
  p->jb = &jb;
  if (setjmp(jb) == 0) {
    item(p);
    return;
  }
  p->m->items.len = nitems;
  p->depth = 0;
  p->nest = 0;
  if (p->i == start) next(p);
  while (p->t[p->i].kind != RX_TOK_EOF &&
         !(p->t[p->i].nl && (is_item_start(&p->t[p->i]) || is_mesh_start(p, p->i))))
    next(p);
}

static void resolve(P *p) {
  for (int k = 0; k < p->unresolved.n; k++) {
    rx_node *n = p->unresolved.d[k];
    switch (n->kind) {
    case RX_NODE_CALL_TENSOR:
      n->tfn = ir_module_tensor_fn(p->m, n->callee);
      if (!n->tfn)
        base_diag_report(p->diag, RX_DIAG_ERROR, n->loc, "unknown tensor program '%s'", n->callee);
      break;
    case RX_NODE_CALL_EXTERN:
      n->ext = ir_module_extern_fn(p->m, n->callee);
      if (!n->ext)
        base_diag_report(p->diag, RX_DIAG_ERROR, n->loc, "unknown extern function '%s'", n->callee);
      else if (!n->out && n->ext->ret)
        n->out = n->ext->ret; /* a returning extern: its declared result */
      else if (!n->out)
        base_diag_report(p->diag, RX_DIAG_ERROR, n->loc,
                         "call_extern(%s) requires out=STRUCT_INFO: '%s' is destination-passing",
                         n->callee, n->callee);
      break;
    case RX_NODE_CALL_GRAPH:
      n->gfn = ir_module_graph_fn(p->m, n->callee);
      if (!n->gfn)
        base_diag_report(p->diag, RX_DIAG_ERROR, n->loc, "graph function '%s' is not defined",
                         n->callee);
      break;
    default:
      RX_ASSERT(!"unexpected node to resolve");
    }
  }
}

bool ir_parse_module(rx_module *m, const char *name, const char *text, size_t len, rx_diag *diag) {
  int errors = diag->errors;
  rx_source *src = ir_module_alloc(m, sizeof *src);
  src->name = base_arena_strdup(&m->arena, name ? name : "<input>");
  src->text = base_arena_strndup(&m->arena, text ? text : "", text ? len : 0);
  src->len = text ? len : 0;
  RX_VEC_PUSH(&m->sources, src);
  if (src->len > (size_t)UINT32_MAX / 2) {
    base_diag_report(diag, RX_DIAG_ERROR, (rx_loc){0}, "%s: source too large", src->name);
    return false;
  }
  P p = {.m = m, .diag = diag};
  if (!ir_lex(m, src, diag, &p.t, &p.n)) return false;
  for (int k = 0; k + 1 < p.n; k++)
    if (tok_is_kw(&p.t[k], "graph_fn") && p.t[k + 1].kind == RX_TOK_IDENT)
      APUSH(&p, &p.gnames, tok_text(&p, &p.t[k + 1]));
  while (p.t[p.i].kind != RX_TOK_EOF) guarded_item(&p);
  base_ptrmap_free(&p.defined_at);
  base_ptrmap_free(&p.visible_at);
  resolve(&p);
  return diag->errors == errors;
}
