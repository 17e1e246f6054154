/* The parser of the text format (docs/text-format.md): tokens to graph functions, tensor
 * programs and extern declarations.
 *
 * Errors: every error is reported with the place and what was expected, then abandons the
 * item (function) being parsed: the parser longjmps back to the item loop, skips to the next
 * line that starts an item, and goes on. All memory, temporaries included, is in the module
 * arena, so abandoning a half-built item leaks nothing. Calls of tensor programs, externs
 * and graph functions are resolved after the whole text is parsed (forward references). */
#include "parse.h"

#include "ir.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  MAX_DEPTH = 256,  /* nesting of parentheses, calls, blocks, struct info */
  MAX_CHAIN = 4096, /* binary operators in one chain */
  MAX_NDIM = 1024,  /* ndim=K in struct info */
};

/* A growable array in the module arena (temporaries die with the module, never leak). */
#define AVEC(T)                                                                                    \
  struct {                                                                                         \
    T *d;                                                                                          \
    int n, cap;                                                                                    \
  }
#define APUSH(p, v, x)                                                                             \
  do {                                                                                             \
    if ((v)->n == (v)->cap) (v)->d = grow((p), (v)->d, (v)->n, &(v)->cap, sizeof *(v)->d);         \
    (v)->d[(v)->n++] = (x);                                                                        \
  } while (0)

/* A name visible in a tensor program: a let-local or a buffer. */
typedef struct tname {
  const char *name;
  rx_local *local;
  rx_buffer *buf;
} tname;

typedef struct P {
  rx_module *m;
  rx_diag *diag;
  rx_tok *t; /* tokens, ending with EOF */
  int n, i;
  int depth;                  /* current nesting (MAX_DEPTH) */
  int nest;                   /* open ( and [ inside an expression: newlines do not end it there */
  jmp_buf *jb;                /* the item loop's recovery point */
  AVEC(const char *) gnames;  /* names of the graph functions of this text (forward calls) */
  AVEC(rx_node *) unresolved; /* calls resolved after the whole text */
  /* graph function being parsed */
  AVEC(rx_var *) visible; /* in scope, innermost last */
  AVEC(rx_var *) defined; /* all names of the function (unique) */
  rx_ptrmap defined_at;   /* interned name -> its index in defined (-1: none) */
  rx_ptrmap visible_at;   /* interned name -> its index in visible when pushed (may be stale) */
  /* tensor program being parsed */
  AVEC(tname) tvis;
  AVEC(const char *) symlets; /* names of the symbolic lets parsed so far (fresh bound names) */
} P;

static void *grow(P *p, void *old, int n, int *cap, size_t size) {
  int c = *cap ? *cap * 2 : 8;
  void *d = rx_module_alloc(p->m, size * (size_t)c);
  if (n) memcpy(d, old, size * (size_t)n);
  *cap = c;
  return d;
}

/* ---- tokens ---- */

_Noreturn static void fail_at(P *p, rx_loc loc, const char *fmt, ...) RX_PRINTF(3, 4);

/* The current token; a lexical error is reported as soon as the parser looks at it. */
static rx_tok *cur(P *p) {
  rx_tok *t = &p->t[p->i];
  if (t->kind == RX_TOK_ERROR) fail_at(p, t->loc, "%s", t->s);
  return t;
}
static rx_tok *ahead(P *p, int k) { return &p->t[p->i + k < p->n ? p->i + k : p->n - 1]; }
static void next(P *p) {
  if (p->t[p->i].kind != RX_TOK_EOF) p->i++;
}
static bool is(P *p, rx_tok_kind k) { return cur(p)->kind == k; }
static bool tok_is_kw(const rx_tok *t, const char *kw) {
  size_t n = strlen(kw);
  return t->kind == RX_TOK_IDENT && t->len == n &&
         memcmp(t->loc.src->text + t->loc.offset, kw, n) == 0;
}
static bool is_kw(P *p, const char *kw) { return tok_is_kw(cur(p), kw); }
static bool accept(P *p, rx_tok_kind k) {
  if (!is(p, k)) return false;
  next(p);
  return true;
}
static bool accept_kw(P *p, const char *kw) {
  if (!is_kw(p, kw)) return false;
  next(p);
  return true;
}
static const char *tok_text(P *p, const rx_tok *t) {
  return rx_module_intern(p->m, t->loc.src->text + t->loc.offset, t->len);
}

static const char *const keywords[] = {
    "graph_fn",    "tensor_fn",   "extern_fn",  "impure",  "where",  "dataflow", "return",
    "if",          "else",        "out",        "for",     "in",     "reduce",   "init",
    "update",      "let",         "alloc",      "barrier", "global", "shared",   "local",
    "call_tensor", "call_extern", "match_cast", "prim",    "const",  "true",     "false",
};
bool rx_text_is_reserved(const char *s, size_t n) {
  for (size_t k = 0; k < RX_ARRAY_LEN(keywords); k++)
    if (strlen(keywords[k]) == n && !memcmp(s, keywords[k], n)) return true;
  rx_dtype dt;
  return rx_dtype_parse(s, n, &dt) && dt != RX_DTYPE_UNKNOWN;
}
static bool is_keyword(const rx_tok *t) {
  return t->kind == RX_TOK_IDENT && rx_text_is_reserved(t->loc.src->text + t->loc.offset, t->len);
}

/* ---- errors ---- */

_Noreturn static void fail_at(P *p, rx_loc loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rx_diag_vreport(p->diag, RX_DIAG_ERROR, loc, fmt, ap);
  va_end(ap);
  longjmp(*p->jb, 1);
}

/* Where a missing token belongs: at the end of the previous token when the found one starts a
 * new line (or is the end of the file). */
static rx_loc miss_loc(P *p, const char **found) {
  rx_tok *t = cur(p);
  *found = rx_tok_describe(p->m, t);
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

_Noreturn static void fail_expected(P *p, const char *what) {
  const char *found;
  rx_loc l = miss_loc(p, &found);
  fail_at(p, l, "expected %s, found %s", what, found);
}

static void expect(P *p, rx_tok_kind k, const char *what) {
  if (!accept(p, k)) fail_expected(p, what);
}

static void enter(P *p) {
  if (++p->depth > MAX_DEPTH)
    fail_at(p, cur(p)->loc, "nesting too deep (more than %d levels)", MAX_DEPTH);
}
static void leave(P *p) { p->depth--; }

/* A binding or statement ends at ';', '}', a newline or the end of the file. */
static void end_stmt(P *p, const char *after) {
  rx_tok *t = cur(p);
  if (accept(p, RX_TOK_SEMI)) {
    while (accept(p, RX_TOK_SEMI)) {
    }
    return;
  }
  if (t->kind == RX_TOK_RBRACE || t->kind == RX_TOK_EOF || t->nl) return;
  fail_at(p, t->loc, "expected end of line after %s, found %s", after, rx_tok_describe(p->m, t));
}

/* A name being defined (not a keyword). */
static const char *def_name(P *p, const char *what) {
  rx_tok *t = cur(p);
  if (t->kind != RX_TOK_IDENT) fail_expected(p, what);
  if (is_keyword(t))
    fail_at(p, t->loc, "expected %s, found keyword %s", what, rx_tok_describe(p->m, t));
  next(p);
  return tok_text(p, t);
}

static int64_t int_value(P *p, const rx_tok *t, bool negative) {
  if (t->overflow || t->u > (negative ? (UINT64_C(1) << 63) : (uint64_t)INT64_MAX))
    fail_at(p, t->loc, "integer literal '%s%.*s' does not fit in 64 bits", negative ? "-" : "",
            (int)(t->len > 40 ? 40 : t->len), t->loc.src->text + t->loc.offset);
  if (negative) return t->u == (UINT64_C(1) << 63) ? INT64_MIN : -(int64_t)t->u;
  return (int64_t)t->u;
}

/* An integer literal, optionally negative. */
static int64_t int_lit(P *p, const char *what) {
  bool neg = accept(p, RX_TOK_MINUS);
  if (!is(p, RX_TOK_INT)) fail_expected(p, what);
  int64_t v = int_value(p, cur(p), neg);
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
    *iv = int_value(p, t, neg);
    v = (double)*iv;
  } else {
    fail_expected(p, "a number");
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

static rx_dtype dtype_of(P *p, const rx_tok *t, bool *ok) {
  rx_dtype dt = RX_DTYPE_UNKNOWN;
  *ok = t->kind == RX_TOK_IDENT && rx_dtype_parse(t->loc.src->text + t->loc.offset, t->len, &dt);
  return dt;
}

/* " f32 f16 ...": every dtype's text name, from the table (messages) */
#define DT_NAME_(e, n, b, f, sg) " " n
static const char dtype_names[] = RX_DTYPES(DT_NAME_);
#undef DT_NAME_

static rx_dtype dtype(P *p, bool allow_any) {
  bool ok;
  rx_dtype dt = dtype_of(p, cur(p), &ok);
  if (!ok || (!allow_any && dt == RX_DTYPE_UNKNOWN)) {
    if (cur(p)->kind == RX_TOK_IDENT)
      fail_at(p, cur(p)->loc, "unknown dtype %s: expected one of%s%s",
              rx_tok_describe(p->m, cur(p)), dtype_names, allow_any ? " any" : "");
    fail_expected(p, "a dtype");
  }
  next(p);
  return dt;
}

/* ---- symbolic expressions ---- */

static const rx_expr *sym(P *p);

static const rx_expr *sym_primary(P *p) {
  rx_tok *t = cur(p);
  rx_expr_ctx *c = p->m->ctx;
  if (t->kind == RX_TOK_INT) {
    int64_t v = int_value(p, t, false);
    next(p);
    return rx_expr_const(c, v);
  }
  if (t->kind == RX_TOK_LPAREN) {
    next(p);
    p->nest++;
    const rx_expr *e = sym(p);
    expect(p, RX_TOK_RPAREN, "')' to close '('");
    p->nest--;
    return e;
  }
  if (t->kind != RX_TOK_IDENT) fail_expected(p, "a symbolic expression");
  if (accept_kw(p, "true")) return rx_expr_const(c, 1);
  if (accept_kw(p, "false")) return rx_expr_const(c, 0);
  if (is_keyword(t))
    fail_at(p, t->loc, "expected a symbolic expression, found keyword %s",
            rx_tok_describe(p->m, t));
  if (ahead(p, 1)->kind == RX_TOK_LPAREN) {
    int arity = tok_is_kw(t, "select") ? 3 : (tok_is_kw(t, "min") || tok_is_kw(t, "max")) ? 2 : 0;
    if (!arity)
      fail_at(p, t->loc,
              "unknown function %s in a symbolic expression: expected min, max or select",
              rx_tok_describe(p->m, t));
    next(p);
    next(p);
    p->nest++;
    const rx_expr *a[3];
    for (int k = 0; k < arity; k++) {
      if (k) expect(p, RX_TOK_COMMA, "',' between arguments");
      a[k] = sym(p);
    }
    expect(p, RX_TOK_RPAREN, "')' after arguments");
    p->nest--;
    if (arity == 3) return rx_expr_select(c, a[0], a[1], a[2]);
    return tok_is_kw(t, "min") ? rx_expr_min(c, a[0], a[1]) : rx_expr_max(c, a[0], a[1]);
  }
  next(p);
  return rx_expr_var(c, tok_text(p, t));
}

static const rx_expr *sym_unary(P *p) {
  if (!is(p, RX_TOK_MINUS)) return sym_primary(p);
  next(p);
  if (is(p, RX_TOK_INT)) {
    int64_t v = int_value(p, cur(p), true);
    next(p);
    return rx_expr_const(p->m->ctx, v);
  }
  enter(p);
  const rx_expr *e = rx_expr_neg(p->m->ctx, sym_unary(p));
  leave(p);
  return e;
}

/* A binary operator continues the expression unless it starts a new line outside brackets. */
static bool op_here(P *p) { return !cur(p)->nl || p->nest > 0; }

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
      fail_at(p, cur(p)->loc, "'/' is not an integer operator: use '//' for floor division");
    else
      break;
    if (k > MAX_CHAIN) fail_at(p, cur(p)->loc, "expression too long");
    next(p);
    a = rx_expr_make(p->m->ctx, op, a, sym_unary(p), NULL);
  }
  return a;
}

static const rx_expr *sym_add(P *p) {
  const rx_expr *a = sym_mul(p);
  for (int k = 0; op_here(p) && (is(p, RX_TOK_PLUS) || is(p, RX_TOK_MINUS)); k++) {
    bool plus = is(p, RX_TOK_PLUS);
    if (k > MAX_CHAIN) fail_at(p, cur(p)->loc, "expression too long");
    next(p);
    const rx_expr *b = sym_mul(p);
    a = plus ? rx_expr_add(p->m->ctx, a, b) : rx_expr_sub(p->m->ctx, a, b);
  }
  return a;
}

static bool cmp_tok(rx_tok_kind k, rx_expr_kind *ek, rx_binop *bo) {
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
  for (int n = 0; op_here(p) && cmp_tok(cur(p)->kind, &k, NULL); n++) {
    if (n > MAX_CHAIN) fail_at(p, cur(p)->loc, "expression too long");
    next(p);
    a = rx_expr_cmp(p->m->ctx, k, a, sym_add(p));
  }
  return a;
}

static const rx_expr *sym_not(P *p) {
  if (!is(p, RX_TOK_BANG)) return sym_cmp(p);
  next(p);
  enter(p);
  const rx_expr *e = rx_expr_not(p->m->ctx, sym_not(p));
  leave(p);
  return e;
}

static const rx_expr *sym_and(P *p) {
  const rx_expr *a = sym_not(p);
  for (int k = 0; op_here(p) && is(p, RX_TOK_ANDAND); k++) {
    if (k > MAX_CHAIN) fail_at(p, cur(p)->loc, "expression too long");
    next(p);
    a = rx_expr_and(p->m->ctx, a, sym_not(p));
  }
  return a;
}

static const rx_expr *sym(P *p) {
  enter(p);
  const rx_expr *a = sym_and(p);
  for (int k = 0; op_here(p) && is(p, RX_TOK_OROR); k++) {
    if (k > MAX_CHAIN) fail_at(p, cur(p)->loc, "expression too long");
    next(p);
    a = rx_expr_or(p->m->ctx, a, sym_and(p));
  }
  leave(p);
  return a;
}

/* `[e, e, ...]` after the '[' was consumed; returns the count. */
static int sym_list(P *p, const rx_expr ***out, rx_tok_kind close, const char *what) {
  AVEC(const rx_expr *) v = {0};
  p->nest++;
  if (!accept(p, close)) {
    for (;;) {
      APUSH(p, &v, sym(p));
      if (accept(p, close)) break;
      if (!accept(p, RX_TOK_COMMA)) fail_expected(p, what);
      if (accept(p, close)) break;
    }
  }
  p->nest--;
  /* never NULL: an empty list (f32[]) is a known 0-d shape, not an unknown one */
  *out = v.d ? v.d : rx_module_alloc(p->m, sizeof *v.d);
  return v.n;
}

/* `where FACT, FACT` (optional) */
static int facts(P *p, const rx_expr ***out, rx_loc **locs) {
  *out = NULL;
  *locs = NULL;
  if (!accept_kw(p, "where")) return 0;
  AVEC(const rx_expr *) v = {0};
  AVEC(rx_loc) l = {0};
  do {
    APUSH(p, &l, cur(p)->loc);
    APUSH(p, &v, sym(p));
  } while (accept(p, RX_TOK_COMMA));
  *out = v.d;
  *locs = l.d;
  return v.n;
}

/* ---- struct info ---- */

static const rx_sinfo *sinfo(P *p);

static const rx_sinfo *sinfo_body(P *p) {
  rx_tok *t = cur(p);
  rx_module *m = p->m;
  if (t->kind == RX_TOK_LPAREN) {
    next(p);
    AVEC(const rx_sinfo *) f = {0};
    if (accept(p, RX_TOK_RPAREN)) return rx_sinfo_tuple(m, NULL, 0);
    const rx_sinfo *first = sinfo(p);
    if (accept(p, RX_TOK_RPAREN)) return first;
    APUSH(p, &f, first);
    expect(p, RX_TOK_COMMA, "',' or ')' in a tuple struct info");
    while (!accept(p, RX_TOK_RPAREN)) {
      APUSH(p, &f, sinfo(p));
      if (accept(p, RX_TOK_RPAREN)) break;
      expect(p, RX_TOK_COMMA, "',' or ')' in a tuple struct info");
    }
    return rx_sinfo_tuple(m, f.d, f.n);
  }
  if (t->kind != RX_TOK_IDENT) fail_expected(p, "struct info");
  if (accept_kw(p, "Object")) return rx_sinfo_object(m);
  if (accept_kw(p, "Shape")) {
    if (!accept(p, RX_TOK_LPAREN)) return rx_sinfo_shape(m, -1, NULL);
    const rx_sinfo *s;
    if (accept(p, RX_TOK_LBRACKET)) {
      const rx_expr **dims;
      int n = sym_list(p, &dims, RX_TOK_RBRACKET, "',' or ']' in a shape");
      s = rx_sinfo_shape(m, n, dims);
    } else if (accept_kw(p, "ndim")) {
      expect(p, RX_TOK_ASSIGN, "'=' after 'ndim'");
      rx_tok *nt = cur(p);
      int64_t nd = int_lit(p, "an integer rank");
      if (nd < 0 || nd > MAX_NDIM)
        fail_at(p, nt->loc, "rank %lld out of range 0..%d", (long long)nd, MAX_NDIM);
      s = rx_sinfo_shape(m, (int)nd, NULL);
    } else {
      fail_expected(p, "'[' or 'ndim=' in Shape(...)");
    }
    expect(p, RX_TOK_RPAREN, "')' to close Shape(");
    return s;
  }
  if (accept_kw(p, "Prim")) {
    expect(p, RX_TOK_LPAREN, "'(' after 'Prim'");
    rx_dtype dt = dtype(p, true);
    const rx_expr *v = NULL;
    if (accept(p, RX_TOK_COMMA)) v = sym(p);
    expect(p, RX_TOK_RPAREN, "')' to close Prim(");
    return rx_sinfo_prim(m, dt, v);
  }
  if (accept_kw(p, "Func")) {
    expect(p, RX_TOK_LPAREN, "'(' after 'Func'");
    AVEC(const rx_sinfo *) f = {0};
    while (!accept(p, RX_TOK_RPAREN)) {
      APUSH(p, &f, sinfo(p));
      if (accept(p, RX_TOK_RPAREN)) break;
      expect(p, RX_TOK_COMMA, "',' or ')' in Func(...)");
    }
    expect(p, RX_TOK_ARROW, "'->' and the result of a Func struct info");
    const rx_sinfo *ret = sinfo(p);
    return rx_sinfo_func(m, f.d, f.n, ret);
  }
  bool ok;
  rx_dtype dt = dtype_of(p, t, &ok);
  if (!ok) {
    if (ahead(p, 1)->kind == RX_TOK_LBRACKET)
      fail_at(p, t->loc, "unknown dtype %s: expected one of%s any", rx_tok_describe(m, t),
              dtype_names);
    fail_expected(p, "struct info (a tensor like f32[n, 4], Shape, Prim, Object, Func or a tuple)");
  }
  next(p);
  expect(p, RX_TOK_LBRACKET, "'[' after the dtype of a tensor struct info");
  if (accept(p, RX_TOK_ELLIPSIS)) {
    expect(p, RX_TOK_RBRACKET, "']' after '...'");
    return rx_sinfo_tensor(m, dt, -1, NULL);
  }
  if (is_kw(p, "ndim") && ahead(p, 1)->kind == RX_TOK_ASSIGN) {
    next(p);
    next(p);
    rx_tok *nt = cur(p);
    int64_t nd = int_lit(p, "an integer rank");
    if (nd < 0 || nd > MAX_NDIM)
      fail_at(p, nt->loc, "rank %lld out of range 0..%d", (long long)nd, MAX_NDIM);
    expect(p, RX_TOK_RBRACKET, "']' after the rank");
    return rx_sinfo_tensor(m, dt, (int)nd, NULL);
  }
  const rx_expr **dims;
  int n = sym_list(p, &dims, RX_TOK_RBRACKET, "',' or ']' in a tensor shape");
  const rx_sinfo *s = rx_sinfo_tensor(m, dt, n, dims);
  if (!is_kw(p, "ragged") || ahead(p, 1)->kind != RX_TOK_LPAREN) return s;
  /* `ragged(indptr, b)` (ir.h, rx_sinfo.ragged_by) */
  rx_loc rl = cur(p)->loc;
  next(p);
  next(p);
  if (n < 1) fail_at(p, rl, "a ragged tensor has a leading axis to pack its rows in");
  if (!is(p, RX_TOK_IDENT)) fail_expected(p, "the name of the offsets (indptr) in ragged(...)");
  const char *by = tok_text(p, cur(p));
  next(p);
  expect(p, RX_TOK_COMMA, "',' and the number of rows in ragged(indptr, rows)");
  const rx_expr *rows = sym(p);
  expect(p, RX_TOK_RPAREN, "')' after ragged(indptr, rows)");
  return rx_sinfo_ragged(m, s, by, rows);
}

static const rx_sinfo *sinfo(P *p) {
  enter(p);
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
  int k = rx_ptrmap_get(&p->visible_at, name);
  if (k >= 0 && k < p->visible.n && p->visible.d[k]->name == name) return p->visible.d[k];
  return NULL;
}

static rx_var *define_var(P *p, const char *name, const rx_sinfo *s, rx_loc loc) {
  int k = rx_ptrmap_get(&p->defined_at, name);
  if (k >= 0 && k < p->defined.n) {
    rx_var *o = p->defined.d[k];
    if (o->name == name) {
      rx_diag_report(p->diag, RX_DIAG_ERROR, loc,
                     "duplicate name '%s': first defined at line %u, column %u", name, o->loc.line,
                     o->loc.col);
      rx_diag_report(p->diag, RX_DIAG_NOTE, o->loc, "'%s' first defined here", name);
      longjmp(*p->jb, 1);
    }
  }
  rx_var *v = rx_var_new(p->m, name, s, loc);
  rx_ptrmap_put(&p->defined_at, name, p->defined.n);
  rx_ptrmap_put(&p->visible_at, name, p->visible.n);
  APUSH(p, &p->defined, v);
  APUSH(p, &p->visible, v);
  return v;
}

static rx_node *gexpr(P *p);

static bool is_graph_name(P *p, const char *name) {
  for (int k = 0; k < p->gnames.n; k++)
    if (p->gnames.d[k] == name) return true;
  return rx_module_graph_fn(p->m, name) != NULL;
}

/* Is the current token `IDENT =` (a named argument)? */
static bool at_named(P *p) { return is(p, RX_TOK_IDENT) && ahead(p, 1)->kind == RX_TOK_ASSIGN; }

/* Between arguments: ',' (consumed; returns false) or ')' (consumed; returns true). */
static bool arg_sep(P *p) {
  if (accept(p, RX_TOK_RPAREN)) return true;
  if (!accept(p, RX_TOK_COMMA)) fail_expected(p, "',' or ')' after an argument");
  return accept(p, RX_TOK_RPAREN);
}

static void attr_value(P *p, rx_attr *a) {
  switch (a->kind) {
  case RX_ATTR_INT:
    a->i = int_lit(p, "an integer");
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
      fail_expected(p, "true or false");
    return;
  case RX_ATTR_STR:
    if (!is(p, RX_TOK_STRING)) fail_expected(p, "a string");
    a->s = cur(p)->s;
    next(p);
    return;
  case RX_ATTR_DTYPE:
    a->dtype = dtype(p, true);
    return;
  case RX_ATTR_INTS: {
    expect(p, RX_TOK_LBRACKET, "'[' to start a list of integers");
    AVEC(int64_t) v = {0};
    while (!accept(p, RX_TOK_RBRACKET)) {
      APUSH(p, &v, int_lit(p, "an integer"));
      if (accept(p, RX_TOK_RBRACKET)) break;
      expect(p, RX_TOK_COMMA, "',' or ']' in a list of integers");
    }
    a->ints = v.d;
    a->n = v.n;
    return;
  }
  case RX_ATTR_EXPRS: {
    expect(p, RX_TOK_LBRACKET, "'[' to start a list of symbolic expressions");
    a->n = sym_list(p, &a->exprs, RX_TOK_RBRACKET, "',' or ']' in a list");
    return;
  }
  }
}

static rx_node *op_call(P *p, const rx_op *op, rx_tok *name) {
  const ir_op_registry *ops = p->m->ops;
  rx_node *n = rx_node_new(p->m, RX_NODE_CALL, name->loc);
  n->op = op;
  AVEC(rx_node *) args = {0};
  rx_attr **slot = rx_module_alloc(p->m, sizeof *slot * (size_t)(ops->nattrs(op) + 1));
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
          fail_at(p, at->loc, "operator '%s' has no attribute %s", ops->name(op),
                  rx_tok_describe(p->m, at));
        if (slot[idx]) fail_at(p, at->loc, "attribute '%s' given twice", ops->attr(op, idx)->name);
        next(p);
        next(p);
        named = true;
      } else if (named) {
        fail_at(p, at->loc, "positional argument after a named attribute");
      } else if (ops->max_args(op) < 0 || npos < ops->max_args(op)) {
        APUSH(p, &args, gexpr(p));
        npos++;
      } else {
        idx = npos - ops->max_args(op);
        if (idx >= ops->nattrs(op))
          fail_at(p, at->loc, "operator '%s' takes at most %d argument%s%s", ops->name(op),
                  ops->max_args(op), ops->max_args(op) == 1 ? "" : "s",
                  ops->nattrs(op) ? " and its attributes" : "");
        if (slot[idx]) fail_at(p, at->loc, "attribute '%s' given twice", ops->attr(op, idx)->name);
        npos++;
      }
      if (idx >= 0) {
        rx_attr *a = rx_module_alloc(p->m, sizeof *a);
        a->name =
            rx_module_intern(p->m, ops->attr(op, idx)->name, strlen(ops->attr(op, idx)->name));
        a->kind = ops->attr(op, idx)->kind;
        a->loc = cur(p)->loc;
        attr_value(p, a);
        slot[idx] = a;
      }
      if (arg_sep(p)) break;
    }
  }
  if (args.n < ops->min_args(op))
    fail_at(p, name->loc, "operator '%s' expects at least %d argument%s, found %d", ops->name(op),
            ops->min_args(op), ops->min_args(op) == 1 ? "" : "s", args.n);
  n->args = args.d;
  n->nargs = args.n;
  n->attrs = rx_module_alloc(p->m, sizeof *n->attrs * (size_t)(ops->nattrs(op) + 1));
  for (int k = 0; k < ops->nattrs(op); k++) {
    if (slot[k])
      n->attrs[n->nattrs++] = *slot[k];
    else if (ops->attr(op, k)->required)
      fail_at(p, name->loc, "operator '%s' requires attribute '%s'", ops->name(op),
              ops->attr(op, k)->name);
  }
  return n;
}

/* call_tensor(PROG, args..., out=SINFO, dims=[...]) / call_extern(NAME, args..., out=SINFO,
 * dims=[...]): dims are the values of the callee's scalar parameters, in order. */
static rx_node *dps_call(P *p, bool tensor, rx_loc loc) {
  const char *what = tensor ? "call_tensor" : "call_extern";
  rx_node *n = rx_node_new(p->m, tensor ? RX_NODE_CALL_TENSOR : RX_NODE_CALL_EXTERN, loc);
  expect(p, RX_TOK_LPAREN, tensor ? "'(' after 'call_tensor'" : "'(' after 'call_extern'");
  if (is(p, RX_TOK_IDENT) && !is_keyword(cur(p)))
    n->callee = tok_text(p, cur(p));
  else if (!tensor && is(p, RX_TOK_STRING))
    n->callee = rx_module_intern(p->m, cur(p)->s, strlen(cur(p)->s));
  else
    fail_expected(p, tensor ? "the name of a tensor program" : "the name of an extern function");
  next(p);
  AVEC(rx_node *) args = {0};
  bool done = accept(p, RX_TOK_RPAREN);
  if (!done) expect(p, RX_TOK_COMMA, "',' or ')' after the callee");
  bool have_dims = false;
  while (!done) {
    rx_tok *at = cur(p);
    if (at_named(p)) {
      next(p);
      next(p);
      if (tok_is_kw(at, "out")) {
        if (n->out || n->inplace) fail_at(p, at->loc, "'out' given twice (or with 'inplace')");
        n->out = sinfo(p);
      } else if (tensor && tok_is_kw(at, "inplace")) {
        if (n->out || n->inplace) fail_at(p, at->loc, "'inplace' given twice (or with 'out')");
        n->inplace = gexpr(p);
      } else if (tok_is_kw(at, "dims")) {
        if (have_dims) fail_at(p, at->loc, "'dims' given twice");
        have_dims = true;
        expect(p, RX_TOK_LBRACKET, "'[' after 'dims='");
        n->nextra = sym_list(p, &n->extra_dims, RX_TOK_RBRACKET, "',' or ']' in dims");
      } else {
        fail_at(p, at->loc, "%s has no argument %s: expected %s", what, rx_tok_describe(p->m, at),
                tensor ? "'out', 'inplace' or 'dims'" : "'out' or 'dims'");
      }
    } else {
      if (n->out || n->inplace || have_dims)
        fail_at(p, at->loc, "positional argument after a named argument");
      APUSH(p, &args, gexpr(p));
    }
    done = arg_sep(p);
  }
  /* a returning extern's result defaults to its declared one (checked when names resolve) */
  if (!n->out && !n->inplace && tensor)
    fail_at(p, loc, "call_tensor requires out=STRUCT_INFO or inplace=VARIABLE");
  n->args = args.d;
  n->nargs = args.n;
  APUSH(p, &p->unresolved, n);
  return n;
}

/* const(SINFO, [v, ...]) or const(SINFO, v) for a 0-d tensor */
static rx_node *const_node(P *p, rx_loc loc) {
  expect(p, RX_TOK_LPAREN, "'(' after 'const'");
  rx_tok *st = cur(p);
  const rx_sinfo *s = sinfo(p);
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
    fail_at(
        p, st->loc,
        "const needs a tensor struct info with a dtype and a static shape of at most 2^28 values");
  expect(p, RX_TOK_COMMA, "',' and the values of the constant");
  dvec v = {0};
  ivec iv = {0};
  bool all_int = true;
  if (accept(p, RX_TOK_LBRACKET)) {
    while (!accept(p, RX_TOK_RBRACKET)) {
      const_value(p, &v, &iv, &all_int);
      if (accept(p, RX_TOK_RBRACKET)) break;
      expect(p, RX_TOK_COMMA, "',' or ']' in the values of a constant");
    }
  } else {
    const_value(p, &v, &iv, &all_int);
  }
  if ((uint64_t)v.n != count)
    fail_at(p, st->loc, "const of %llu value%s has %d", (unsigned long long)count,
            count == 1 ? "" : "s", v.n);
  expect(p, RX_TOK_RPAREN, "')' after the values of a constant");
  rx_node *n = rx_node_new(p->m, RX_NODE_CONST, loc);
  n->sinfo = s;
  n->data = v.d;
  n->count = (size_t)v.n;
  if (all_int && !rx_dtype_is_float(s->dtype)) n->idata = iv.d;
  return n;
}

/* prim(EXPR) or prim(DTYPE, EXPR); a float dtype takes a number */
static rx_node *prim_node(P *p, rx_loc loc) {
  expect(p, RX_TOK_LPAREN, "'(' after 'prim'");
  rx_dtype dt = RX_DTYPE_I64;
  bool ok;
  rx_dtype d2 = dtype_of(p, cur(p), &ok);
  if (ok && ahead(p, 1)->kind == RX_TOK_COMMA) {
    if (d2 == RX_DTYPE_UNKNOWN) fail_at(p, cur(p)->loc, "prim needs a known dtype");
    dt = d2;
    next(p);
    next(p);
  }
  rx_node *n;
  p->nest++;
  if (rx_dtype_is_float(dt))
    n = rx_node_float(p->m, dt, num_lit(p, false), loc);
  else
    n = rx_node_int(p->m, dt, sym(p), loc);
  p->nest--;
  expect(p, RX_TOK_RPAREN, "')' to close prim(");
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
      n = rx_node_int(m, RX_DTYPE_I64, rx_expr_const(m->ctx, int_value(p, nt, neg)), loc);
    else if (nt->kind == RX_TOK_FLOAT)
      n = rx_node_float(m, RX_DTYPE_F32, neg ? -nt->f : nt->f, loc);
    else
      fail_expected(p, "a number after '-'");
    next(p);
    n->weak = true;
    return n;
  }
  if (t->kind == RX_TOK_LBRACKET) {
    next(p);
    rx_node *n = rx_node_new(m, RX_NODE_SHAPE, loc);
    n->ndims = sym_list(p, &n->dims, RX_TOK_RBRACKET, "',' or ']' in a shape");
    return n;
  }
  if (t->kind == RX_TOK_LPAREN) {
    next(p);
    AVEC(rx_node *) f = {0};
    if (!accept(p, RX_TOK_RPAREN)) {
      rx_node *first = gexpr(p);
      if (accept(p, RX_TOK_RPAREN)) return first;
      APUSH(p, &f, first);
      if (!accept(p, RX_TOK_COMMA)) fail_expected(p, "',' or ')' in a tuple");
      while (!accept(p, RX_TOK_RPAREN)) {
        APUSH(p, &f, gexpr(p));
        if (accept(p, RX_TOK_RPAREN)) break;
        if (!accept(p, RX_TOK_COMMA)) fail_expected(p, "',' or ')' in a tuple");
      }
    }
    rx_node *n = rx_node_new(m, RX_NODE_TUPLE, loc);
    n->args = f.d;
    n->nargs = f.n;
    return n;
  }
  if (t->kind != RX_TOK_IDENT) fail_expected(p, "an expression");
  if (accept_kw(p, "true") || accept_kw(p, "false")) {
    rx_node *n = rx_node_int(m, RX_DTYPE_BOOL, rx_expr_const(m->ctx, tok_is_kw(t, "true")), loc);
    n->weak = true;
    return n;
  }
  if (accept_kw(p, "prim")) return prim_node(p, loc);
  if (accept_kw(p, "const")) return const_node(p, loc);
  if (accept_kw(p, "call_tensor")) return dps_call(p, true, loc);
  if (accept_kw(p, "call_extern")) return dps_call(p, false, loc);
  if (is_kw(p, "match_cast") || is_kw(p, "if"))
    fail_at(p, loc, "%s is only allowed as the whole right side of a binding",
            rx_tok_describe(m, t));
  /* `where` is also the op where(cond, a, b): a keyword only when no `(` follows */
  bool where_op = tok_is_kw(t, "where") && ahead(p, 1)->kind == RX_TOK_LPAREN;
  if (is_keyword(t) && !where_op)
    fail_at(p, loc, "expected an expression, found keyword %s", rx_tok_describe(m, t));
  const char *name = tok_text(p, t);
  next(p);
  if (accept(p, RX_TOK_LPAREN)) {
    if (is_graph_name(p, name)) {
      rx_node *n = rx_node_new(m, RX_NODE_CALL_GRAPH, loc);
      n->callee = name;
      AVEC(rx_node *) args = {0};
      if (!accept(p, RX_TOK_RPAREN)) {
        do APUSH(p, &args, gexpr(p));
        while (!arg_sep(p));
      }
      n->args = args.d;
      n->nargs = args.n;
      APUSH(p, &p->unresolved, n);
      return n;
    }
    if (!m->ops)
      fail_at(p, loc, "operator '%s' in a module that knows no ops (made without an op registry)",
              name);
    const rx_op *op = m->ops->lookup(name, strlen(name));
    if (!op) fail_at(p, loc, "unknown operator '%s'", name);
    return op_call(p, op, t);
  }
  rx_var *v = lookup_var(p, name);
  if (!v) fail_at(p, loc, "undefined variable '%s'", name);
  return rx_node_var(m, v, loc);
}

static rx_node *gexpr(P *p) {
  enter(p);
  p->nest++;
  rx_node *e = gprimary(p);
  for (int k = 0; is(p, RX_TOK_DOT); k++) {
    if (k > MAX_CHAIN) fail_at(p, cur(p)->loc, "expression too long");
    rx_loc loc = cur(p)->loc;
    next(p);
    if (!is(p, RX_TOK_INT)) fail_expected(p, "a field index after '.'");
    rx_tok *it = cur(p);
    if (it->overflow || it->u > 1000000) fail_at(p, it->loc, "field index too large");
    next(p);
    rx_node *g = rx_node_new(p->m, RX_NODE_GET_ITEM, loc);
    g->args = rx_module_alloc(p->m, sizeof *g->args);
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
  expect(p, RX_TOK_LBRACE, "'{' to start a branch");
  int mark = p->visible.n;
  rx_seq *s = rx_module_alloc(p->m, sizeof *s);
  rx_block *b = rx_module_alloc(p->m, sizeof *b);
  b->loc = cur(p)->loc;
  AVEC(rx_binding *) bs = {0};
  for (;;) {
    if (is(p, RX_TOK_EOF)) fail_at(p, open->loc, "unterminated branch: expected its value and '}'");
    if (is(p, RX_TOK_IDENT) && !is_keyword(cur(p)) &&
        (ahead(p, 1)->kind == RX_TOK_ASSIGN || ahead(p, 1)->kind == RX_TOK_COLON)) {
      APUSH(p, &bs, binding(p, false));
      continue;
    }
    if (is(p, RX_TOK_RBRACE)) fail_expected(p, "the value of the branch before '}'");
    s->result = gexpr(p);
    end_stmt(p, "the value of a branch");
    expect(p, RX_TOK_RBRACE, "'}' after the value of a branch");
    break;
  }
  b->bindings = bs.d;
  b->nbindings = bs.n;
  if (bs.n) {
    s->blocks = rx_module_alloc(p->m, sizeof *s->blocks);
    s->blocks[0] = b;
    s->nblocks = 1;
  }
  p->visible.n = mark;
  return s;
}

static rx_binding *binding(P *p, bool in_dataflow) {
  rx_tok *nt = cur(p);
  rx_loc loc = nt->loc;
  const char *name = def_name(p, "a binding ('NAME = EXPR')");
  rx_binding *b = rx_module_alloc(p->m, sizeof *b);
  b->loc = loc;
  if (accept(p, RX_TOK_COLON)) b->annot = sinfo(p);
  expect(p, RX_TOK_ASSIGN, "'=' after the name of a binding");
  enter(p);
  rx_tok *vt = cur(p);
  if (accept_kw(p, "match_cast")) {
    expect(p, RX_TOK_LPAREN, "'(' after 'match_cast'");
    p->nest++;
    b->value = gexpr(p);
    expect(p, RX_TOK_COMMA, "',' and the struct info of match_cast");
    b->cast = sinfo(p);
    expect(p, RX_TOK_RPAREN, "')' to close match_cast(");
    p->nest--;
  } else if (is_kw(p, "if")) {
    if (in_dataflow) fail_at(p, vt->loc, "'if' is not allowed inside a dataflow block");
    next(p);
    rx_node *n = rx_node_new(p->m, RX_NODE_IF, vt->loc);
    n->cond = gexpr(p);
    n->then_seq = branch(p);
    if (!accept_kw(p, "else")) fail_expected(p, "'else' after the first branch of 'if'");
    n->else_seq = branch(p);
    b->value = n;
  } else {
    b->value = gexpr(p);
  }
  leave(p);
  end_stmt(p, "a binding");
  b->var = define_var(p, name, b->annot, loc);
  return b;
}

static rx_block *new_block(P *p, bool dataflow, rx_loc loc, rx_binding **bs, int n) {
  rx_block *b = rx_module_alloc(p->m, sizeof *b);
  b->dataflow = dataflow;
  b->loc = loc;
  b->bindings = bs;
  b->nbindings = n;
  return b;
}

static void graph_fn(P *p, rx_loc loc) {
  rx_graph_fn *f = rx_module_alloc(p->m, sizeof *f);
  f->loc = loc;
  f->name = def_name(p, "the name of the graph function");
  p->visible.n = p->defined.n = 0;
  expect(p, RX_TOK_LPAREN, "'(' to start the parameters");
  AVEC(rx_var *) params = {0};
  while (!accept(p, RX_TOK_RPAREN)) {
    rx_loc ploc = cur(p)->loc;
    const char *pn = def_name(p, "a parameter name");
    expect(p, RX_TOK_COLON, "':' and the struct info of the parameter");
    APUSH(p, &params, define_var(p, pn, sinfo(p), ploc));
    if (accept(p, RX_TOK_RPAREN)) break;
    expect(p, RX_TOK_COMMA, "',' or ')' after a parameter");
  }
  f->params = params.d;
  f->nparams = params.n;
  if (accept(p, RX_TOK_ARROW)) f->ret = sinfo(p);
  f->nfacts = facts(p, &f->facts, &f->fact_locs);
  rx_tok *open = cur(p);
  expect(p, RX_TOK_LBRACE, "'{' to start the body of the function");
  AVEC(rx_block *) blocks = {0};
  AVEC(rx_binding *) plain = {0};
  rx_loc plain_loc = cur(p)->loc;
  for (;;) {
    rx_tok *t = cur(p);
    if (t->kind == RX_TOK_EOF)
      fail_at(p, open->loc, "unterminated body of '%s': expected 'return' and '}'", f->name);
    if (t->kind == RX_TOK_RBRACE) fail_at(p, t->loc, "expected 'return' before '}'");
    if (accept_kw(p, "dataflow")) {
      if (plain.n) APUSH(p, &blocks, new_block(p, false, plain_loc, plain.d, plain.n));
      plain.d = NULL;
      plain.n = plain.cap = 0;
      rx_tok *dopen = cur(p);
      expect(p, RX_TOK_LBRACE, "'{' after 'dataflow'");
      AVEC(rx_binding *) bs = {0};
      while (!accept(p, RX_TOK_RBRACE)) {
        if (is(p, RX_TOK_EOF)) fail_at(p, dopen->loc, "unterminated dataflow block: expected '}'");
        APUSH(p, &bs, binding(p, true));
      }
      end_stmt(p, "a dataflow block");
      APUSH(p, &blocks, new_block(p, true, t->loc, bs.d, bs.n));
      plain_loc = cur(p)->loc;
      continue;
    }
    if (accept_kw(p, "return")) {
      f->body.result = gexpr(p);
      end_stmt(p, "the return value");
      expect(p, RX_TOK_RBRACE, "'}' after the return value");
      break;
    }
    if (t->kind != RX_TOK_IDENT || is_keyword(t))
      fail_expected(p, "a binding, 'dataflow' or 'return'");
    APUSH(p, &plain, binding(p, false));
  }
  if (plain.n) APUSH(p, &blocks, new_block(p, false, plain_loc, plain.d, plain.n));
  f->body.blocks = blocks.d;
  f->body.nblocks = blocks.n;
  rx_item it = {RX_ITEM_GRAPH, f};
  RX_VEC_PUSH(&p->m->items, it);
}

/* ---- tensor programs ---- */

static tname *lookup_tname(P *p, const char *name) {
  for (int k = p->tvis.n - 1; k >= 0; k--)
    if (p->tvis.d[k].name == name) return &p->tvis.d[k];
  return NULL;
}

static void define_tname(P *p, const char *name, rx_local *l, rx_buffer *b, rx_loc loc) {
  tname *o = lookup_tname(p, name);
  if (o) {
    rx_loc ol = o->local ? o->local->loc : o->buf->loc;
    fail_at(p, loc, "duplicate name '%s': first defined at line %u, column %u", name, ol.line,
            ol.col);
  }
  tname t = {name, l, b};
  APUSH(p, &p->tvis, t);
}

static rx_tx *tx(P *p);
static int index_list(P *p, rx_tx ***out);

/* `has_fragments(AB, ACC, M, N, K)` (ir.h, RX_TX_HAS_FRAG), at its name. */
static rx_tx *has_fragments(P *p) {
  rx_loc loc = cur(p)->loc;
  next(p);
  next(p);
  rx_dtype dt[2];
  int dims[3];
  for (int i = 0; i < 5; i++) {
    rx_tok *t = cur(p);
    if (i < 2) {
      bool is_dt = false;
      if (t->kind == RX_TOK_IDENT) dt[i] = dtype_of(p, t, &is_dt);
      if (!is_dt || dt[i] == RX_DTYPE_UNKNOWN)
        fail_expected(p, i ? "the accumulator dtype of has_fragments"
                           : "the operand dtype of has_fragments");
    } else {
      if (t->kind != RX_TOK_INT)
        fail_expected(p, "a fragment dimension (an integer) of has_fragments");
      int64_t v = int_value(p, t, false);
      if (v < 1 || v > 256)
        fail_at(p, t->loc, "a fragment dimension is 1 to 256, got %lld", (long long)v);
      dims[i - 2] = (int)v;
    }
    next(p);
    if (i < 4) expect(p, RX_TOK_COMMA, "',' between the arguments of has_fragments");
  }
  expect(p, RX_TOK_RPAREN, "')' after the five arguments of has_fragments(AB, ACC, M, N, K)");
  return rx_tx_has_frag(p->m, dt[0], dt[1], dims[0], dims[1], dims[2], loc);
}

static rx_tx *tx_primary(P *p) {
  rx_tok *t = cur(p);
  rx_module *m = p->m;
  rx_loc loc = t->loc;
  if (t->kind == RX_TOK_INT) {
    int64_t v = int_value(p, t, false);
    next(p);
    return rx_tx_int(m, v, RX_DTYPE_I64, true, loc);
  }
  if (t->kind == RX_TOK_FLOAT) {
    next(p);
    return rx_tx_float(m, t->f, RX_DTYPE_F32, true, loc);
  }
  if (t->kind == RX_TOK_LPAREN) {
    next(p);
    p->nest++;
    rx_tx *e = tx(p);
    expect(p, RX_TOK_RPAREN, "')' to close '('");
    p->nest--;
    return e;
  }
  if (t->kind != RX_TOK_IDENT) fail_expected(p, "an expression");
  if (accept_kw(p, "true") || accept_kw(p, "false"))
    return rx_tx_int(m, tok_is_kw(t, "true"), RX_DTYPE_BOOL, true, loc);
  const char *name = tok_text(p, t);
  rx_tok_kind after = ahead(p, 1)->kind;
  if (after == RX_TOK_LPAREN && tok_is_kw(t, "has_fragments")) return has_fragments(p);
  if (after == RX_TOK_LPAREN) {
    bool is_dt;
    rx_dtype dt = dtype_of(p, t, &is_dt);
    rx_intrinsic in = RX_INTRIN_EXP;
    int arity;
    if (is_dt) {
      if (dt == RX_DTYPE_UNKNOWN) fail_at(p, loc, "cannot cast to 'any'");
      arity = 1;
    } else if (tok_is_kw(t, "select")) {
      arity = 3;
    } else if (rx_intrinsic_lookup(name, strlen(name), &in)) {
      arity = rx_intrinsic_arity(in);
    } else {
      fail_at(p, loc, "unknown intrinsic '%s'", name);
    }
    next(p);
    next(p);
    p->nest++;
    rx_tx *a[3] = {0};
    int n = 0;
    if (!accept(p, RX_TOK_RPAREN)) {
      for (;;) {
        if (n == arity)
          fail_at(p, cur(p)->loc, "'%s' takes %d argument%s", name, arity, arity == 1 ? "" : "s");
        a[n++] = tx(p);
        if (!is_dt && n == arity && rx_intrinsic_kind(in) == 'c') break; /* the message next */
        if (arg_sep(p)) break;
      }
    }
    const char *msg = NULL;
    if (!is_dt && n == arity && rx_intrinsic_kind(in) == 'c') {
      if (!accept(p, RX_TOK_COMMA) || !is(p, RX_TOK_STRING))
        fail_expected(p, "',' and the check's message (a string)");
      msg = cur(p)->s;
      next(p);
      expect(p, RX_TOK_RPAREN, "')' after the check's message");
    }
    p->nest--;
    if (n != arity)
      fail_at(p, loc, "'%s' takes %d argument%s, found %d", name, arity, arity == 1 ? "" : "s", n);
    if (is_dt) return rx_tx_cast(m, dt, a[0], loc);
    if (arity == 3 && tok_is_kw(t, "select")) return rx_tx_select(m, a[0], a[1], a[2], loc);
    rx_tx *c = rx_tx_call(m, in, a, n, loc);
    if (msg && c->kind == RX_TX_CALL) c->msg = msg;
    return c;
  }
  if (is_keyword(t))
    fail_at(p, loc, "expected an expression, found keyword %s", rx_tok_describe(m, t));
  next(p);
  tname *tn = lookup_tname(p, name);
  if (after == RX_TOK_LBRACKET) {
    if (!tn || !tn->buf) fail_at(p, loc, "undefined buffer '%s'", name);
    next(p);
    rx_tx **idx;
    int n = index_list(p, &idx);
    return rx_tx_load(m, tn->buf, idx, n, loc);
  }
  if (tn && tn->local) return rx_tx_local(m, tn->local, loc);
  if (tn) fail_at(p, loc, "buffer '%s' used without indices: expected '%s[...]'", name, name);
  return rx_tx_sym(m, rx_expr_var(m->ctx, name), loc);
}

static rx_tx *tx_unary(P *p) {
  rx_tok *t = cur(p);
  if (t->kind != RX_TOK_MINUS) return tx_primary(p);
  next(p);
  rx_tok *nt = cur(p);
  if (nt->kind == RX_TOK_INT) {
    int64_t v = int_value(p, nt, true);
    next(p);
    return rx_tx_int(p->m, v, RX_DTYPE_I64, true, t->loc);
  }
  if (nt->kind == RX_TOK_FLOAT) {
    next(p);
    return rx_tx_float(p->m, -nt->f, RX_DTYPE_F32, true, t->loc);
  }
  enter(p);
  rx_tx *e = rx_tx_neg(p->m, tx_unary(p), t->loc);
  leave(p);
  return e;
}

/* binary levels, loosest first: 1 ||, 2 &&, (3 !), 4 comparisons, 5 + -, 6 * / // % */
static bool binop_at(P *p, int level, rx_binop *op) {
  switch (cur(p)->kind) {
  case RX_TOK_OROR:
    *op = RX_BINOP_OR;
    break;
  case RX_TOK_ANDAND:
    *op = RX_BINOP_AND;
    break;
  case RX_TOK_PLUS:
    *op = RX_BINOP_ADD;
    break;
  case RX_TOK_MINUS:
    *op = RX_BINOP_SUB;
    break;
  case RX_TOK_STAR:
    *op = RX_BINOP_MUL;
    break;
  case RX_TOK_SLASH:
    *op = RX_BINOP_DIV;
    break;
  case RX_TOK_SLASHSLASH:
    *op = RX_BINOP_FLOORDIV;
    break;
  case RX_TOK_PERCENT:
    *op = RX_BINOP_FLOORMOD;
    break;
  default:
    if (!cmp_tok(cur(p)->kind, NULL, op)) return false;
  }
  return rx_binop_precedence(*op) == level && op_here(p);
}

static rx_tx *tx_level(P *p, int level) {
  if (level == 7) return tx_unary(p);
  if (level == 3) {
    if (!is(p, RX_TOK_BANG)) return tx_level(p, 4);
    rx_loc loc = cur(p)->loc;
    next(p);
    enter(p);
    rx_tx *e = rx_tx_not(p->m, tx_level(p, 3), loc);
    leave(p);
    return e;
  }
  rx_tx *a = tx_level(p, level + 1);
  rx_binop op;
  for (int k = 0; binop_at(p, level, &op); k++) {
    rx_loc loc = cur(p)->loc;
    if (k > MAX_CHAIN) fail_at(p, loc, "expression too long");
    next(p);
    a = rx_tx_binary(p->m, op, a, tx_level(p, level + 1), loc);
  }
  return a;
}

static rx_tx *tx(P *p) {
  enter(p);
  rx_tx *e = tx_level(p, 1);
  leave(p);
  return e;
}

static rx_stmt *tblock(P *p);

/* `i in LO..HI` */
/* Does the bound that starts here (up to `..`, `,`, `{` or the end, outside brackets) load from
 * a buffer (`name[`)? Such a bound becomes a symbolic let before its loop. */
static bool bound_loads(P *p) {
  int depth = 0;
  for (int k = 0;; k++) {
    rx_tok *t = ahead(p, k);
    if (t->kind == RX_TOK_EOF) return false;
    if (t->kind == RX_TOK_LPAREN || t->kind == RX_TOK_LBRACKET) depth++;
    if (t->kind == RX_TOK_RPAREN || t->kind == RX_TOK_RBRACKET) {
      if (depth == 0) return false;
      depth--;
    }
    if (depth == 0 &&
        (t->kind == RX_TOK_DOTDOT || t->kind == RX_TOK_COMMA || t->kind == RX_TOK_LBRACE))
      return false;
    if (t->kind == RX_TOK_IDENT && ahead(p, k + 1)->kind == RX_TOK_LBRACKET) return true;
  }
}

/* `let sym name = value`: defines the symbolic variable name (ir.h, rx_local.sym). */
static rx_stmt *sym_let(P *p, const char *name, rx_tx *value, rx_loc loc) {
  rx_stmt *s = rx_stmt_new(p->m, RX_STMT_LET, loc);
  rx_local *l = rx_module_alloc(p->m, sizeof *l);
  APUSH(p, &p->symlets, name);
  l->name = name;
  l->loc = loc;
  l->dtype = RX_DTYPE_I64;
  l->sym = rx_expr_var(p->m->ctx, name);
  s->local = l;
  s->value = value;
  return s;
}

/* A fresh name for the symbolic let of a loop bound: base_lo / base_hi, numbered when taken by
 * a buffer, a local or any symbolic let before it (the printer flattens the lets into the
 * enclosing block, where two of one name would clash). */
static const char *bound_name(P *p, const char *var, const char *what) {
  char buf[160];
  for (int k = 0;; k++) {
    if (k)
      snprintf(buf, sizeof buf, "%.100s_%s%d", var, what, k);
    else
      snprintf(buf, sizeof buf, "%.100s_%s", var, what);
    const char *n = rx_module_intern(p->m, buf, strlen(buf));
    bool taken = lookup_tname(p, n) != NULL;
    for (int i = 0; i < p->symlets.n && !taken; i++) taken = p->symlets.d[i] == n;
    if (!taken) return n;
  }
}

/* One bound of a range: a symbolic expression, or (when it loads) a symbolic let appended to
 * *lets, whose variable is the bound. */
static const rx_expr *bound(P *p, const char *var, const char *what, rx_stmt **lets, int *nlets) {
  if (!bound_loads(p)) return sym(p);
  rx_loc loc = cur(p)->loc;
  rx_tx *v = tx(p);
  if (v->kind == RX_TX_SYM) return v->sym;
  if (!rx_dtype_is_int(v->dtype))
    fail_at(p, loc, "a loop bound that loads must be an integer, found %s",
            rx_dtype_name(v->dtype));
  rx_stmt *s = sym_let(p, bound_name(p, var, what), v, loc);
  lets[(*nlets)++] = s;
  return s->local->sym;
}

/* `var in lo..hi`; a bound with a load becomes a symbolic let (at most two, in lets). */
static void range(P *p, const rx_expr **var, const rx_expr **lo, const rx_expr **extent,
                  rx_stmt **lets, int *nlets) {
  const char *name = def_name(p, "a loop variable");
  *var = rx_expr_var(p->m->ctx, name);
  if (!accept_kw(p, "in")) fail_expected(p, "'in' after the loop variable");
  *lo = bound(p, name, "lo", lets, nlets);
  expect(p, RX_TOK_DOTDOT, "'..' between the bounds of a range");
  *extent = rx_expr_sub(p->m->ctx, bound(p, name, "hi", lets, nlets), *lo);
}

static rx_loop_kind loop_kind(P *p) {
  if (accept_kw(p, "unroll")) return RX_LOOP_UNROLL;
  if (accept_kw(p, "vectorize")) return RX_LOOP_VECTORIZE;
  if (accept_kw(p, "serial")) return RX_LOOP_SERIAL;
  if (!accept_kw(p, "bind")) return RX_LOOP_SERIAL;
  expect(p, RX_TOK_LPAREN, "'(' after 'bind'");
  for (int k = RX_LOOP_BLOCK_X; k < RX_LOOP_KIND_COUNT; k++) {
    if (accept_kw(p, rx_loop_kind_name((rx_loop_kind)k))) {
      expect(p, RX_TOK_RPAREN, "')' after the bound axis");
      return (rx_loop_kind)k;
    }
  }
  fail_expected(p, "a thread axis (blockIdx.x/y/z or threadIdx.x/y/z)");
}

/* A SEQ of the statements st[0..n). */
static rx_stmt *seq_of(P *p, rx_stmt *const *st, int n, rx_loc loc) {
  rx_stmt *seq = rx_stmt_new(p->m, RX_STMT_SEQ, loc);
  seq->body = rx_module_alloc(p->m, sizeof *seq->body * (size_t)n);
  memcpy(seq->body, st, sizeof *seq->body * (size_t)n);
  seq->n = n;
  return seq;
}

static rx_stmt *for_stmt(P *p, rx_loc loc) {
  AVEC(rx_stmt *) loops = {0};
  AVEC(rx_stmt *) heads = {0}; /* per loop: the loop, or a SEQ of its bounds' lets and it */
  do {
    rx_stmt *s = rx_stmt_new(p->m, RX_STMT_FOR, cur(p)->loc);
    s->vars = rx_module_alloc(p->m, sizeof *s->vars);
    s->lo = rx_module_alloc(p->m, sizeof *s->lo);
    s->extent = rx_module_alloc(p->m, sizeof *s->extent);
    s->nvars = 1;
    rx_stmt *st[3];
    int nlets = 0;
    range(p, &s->vars[0], &s->lo[0], &s->extent[0], st, &nlets);
    s->loop_kind = loop_kind(p);
    APUSH(p, &loops, s);
    st[nlets] = s;
    APUSH(p, &heads, nlets ? seq_of(p, st, nlets + 1, s->loc) : s);
  } while (accept(p, RX_TOK_COMMA));
  loops.d[0]->loc = loc;
  rx_stmt *inner = tblock(p);
  for (int k = loops.n - 1; k >= 0; k--) {
    loops.d[k]->inner = inner;
    if (k > 0)
      inner =
          heads.d[k]->kind == RX_STMT_SEQ ? heads.d[k] : seq_of(p, &heads.d[k], 1, loops.d[k]->loc);
  }
  return heads.d[0];
}

static rx_stmt *reduce_stmt(P *p, rx_loc loc) {
  rx_stmt *s = rx_stmt_new(p->m, RX_STMT_REDUCE, loc);
  AVEC(const rx_expr *) vars = {0};
  AVEC(const rx_expr *) lo = {0};
  AVEC(const rx_expr *) ext = {0};
  AVEC(rx_stmt *) lets = {0}; /* symbolic lets of bounds that load, then the reduce */
  do {
    const rx_expr *v, *l, *e;
    rx_stmt *st[2];
    int nlets = 0;
    range(p, &v, &l, &e, st, &nlets);
    for (int k = 0; k < nlets; k++) APUSH(p, &lets, st[k]);
    APUSH(p, &vars, v);
    APUSH(p, &lo, l);
    APUSH(p, &ext, e);
  } while (accept(p, RX_TOK_COMMA));
  s->vars = vars.d;
  s->lo = lo.d;
  s->extent = ext.d;
  s->nvars = vars.n;
  rx_tok *open = cur(p);
  expect(p, RX_TOK_LBRACE, "'{' to start the reduction");
  if (!accept_kw(p, "init")) fail_expected(p, "'init { ... }' in a reduction");
  s->init = tblock(p);
  if (!accept_kw(p, "update")) fail_expected(p, "'update { ... }' after 'init { ... }'");
  s->inner = tblock(p);
  if (!accept(p, RX_TOK_RBRACE)) {
    if (is(p, RX_TOK_EOF)) fail_at(p, open->loc, "unterminated reduction: expected '}'");
    fail_expected(p, "'}' to close the reduction");
  }
  if (!lets.n) return s;
  APUSH(p, &lets, s);
  return seq_of(p, lets.d, lets.n, loc);
}

/* An operand of mma or frag that names a buffer. */
static rx_buffer *buf_operand(P *p, const char *what, const char *stmt) {
  rx_tok *nt = cur(p);
  if (nt->kind != RX_TOK_IDENT) fail_expected(p, what);
  const char *name = tok_text(p, nt);
  tname *tn = lookup_tname(p, name);
  if (!tn || !tn->buf) fail_at(p, nt->loc, "undefined buffer '%s' (%s of %s)", name, what, stmt);
  next(p);
  return tn->buf;
}

/* `i, j]` after a buffer's '[': the indices of a load, a store or a fragment's load or store
 * into *out; returns their count. */
static int index_list(P *p, rx_tx ***out) {
  p->nest++;
  AVEC(rx_tx *) idx = {0};
  while (!accept(p, RX_TOK_RBRACKET)) {
    APUSH(p, &idx, tx(p));
    if (accept(p, RX_TOK_RBRACKET)) break;
    expect(p, RX_TOK_COMMA, "',' or ']' after an index");
  }
  p->nest--;
  *out = idx.d;
  return idx.n;
}

/* `fragment USE` after an alloc's type (ir.h, RX_STMT_FRAG): a subgroup matrix fragment. */
static void frag_use(P *p, rx_buffer *b) {
  b->scope = RX_SCOPE_LOCAL;
  for (int u = RX_FRAG_A; u < RX_FRAG_USE_COUNT; u++)
    if (accept_kw(p, rx_frag_use_name((rx_frag_use)u))) {
      b->frag = (rx_frag_use)u;
      return;
    }
  fail_expected(p, "the use of the fragment after 'fragment': a, b or acc");
}

/* `frag OP ...` (ir.h, RX_STMT_FRAG), at `frag`. */
static rx_stmt *frag_stmt(P *p, rx_loc loc) {
  next(p);
  rx_tok *ot = cur(p);
  int op = 0;
  while (op < RX_FRAG_OP_COUNT && !tok_is_kw(ot, rx_frag_op_name((rx_frag_op)op))) op++;
  if (op == RX_FRAG_OP_COUNT) fail_expected(p, "fill, load, mma or store after 'frag'");
  next(p);
  rx_stmt *s = rx_stmt_new(p->m, RX_STMT_FRAG, loc);
  s->frag_op = (rx_frag_op)op;
  s->buf = buf_operand(p, op == RX_FRAG_OP_MMA ? "the fragment of D" : "the fragment", "frag");
  expect(p, RX_TOK_COMMA, "',' and the next operand of frag");
  switch (s->frag_op) {
  case RX_FRAG_OP_FILL:
    s->value = tx(p);
    break;
  case RX_FRAG_OP_MMA:
    s->mma_a = buf_operand(p, "the fragment of A", "frag mma");
    expect(p, RX_TOK_COMMA, "',' and the fragment of B");
    s->mma_b = buf_operand(p, "the fragment of B", "frag mma");
    expect(p, RX_TOK_COMMA, "',' and the fragment of C");
    s->mma_c = buf_operand(p, "the fragment of C", "frag mma");
    break;
  case RX_FRAG_OP_LOAD:
  case RX_FRAG_OP_STORE:
    s->mem = buf_operand(p, "the buffer in memory", "frag");
    expect(p, RX_TOK_LBRACKET, "'[' and the index of the fragment's first element");
    s->nidx = index_list(p, &s->idx);
    expect(p, RX_TOK_COMMA, "',' and the stride (elements between rows)");
    s->value = tx(p);
    if (accept(p, RX_TOK_COMMA)) {
      if (!accept_kw(p, "col_major")) fail_expected(p, "'col_major' after the stride");
      s->col_major = true;
    }
    break;
  case RX_FRAG_OP_COUNT:
    break;
  }
  return s;
}

static rx_buffer *buffer_decl(P *p, const char *name, rx_loc loc, rx_scope scope) {
  rx_buffer *b = rx_module_alloc(p->m, sizeof *b);
  b->name = name;
  b->loc = loc;
  b->scope = scope;
  b->dtype = dtype(p, true);
  expect(p, RX_TOK_LBRACKET, "'[' and the shape of the buffer");
  b->ndim = sym_list(p, &b->shape, RX_TOK_RBRACKET, "',' or ']' in the shape of a buffer");
  return b;
}

static rx_stmt *if_stmt(P *p, rx_loc loc) {
  rx_stmt *s = rx_stmt_new(p->m, RX_STMT_IF, loc);
  s->value = tx(p);
  s->inner = tblock(p);
  if (accept_kw(p, "else")) {
    if (is_kw(p, "if")) {
      rx_loc l2 = cur(p)->loc;
      next(p);
      rx_stmt *seq = rx_stmt_new(p->m, RX_STMT_SEQ, l2);
      seq->body = rx_module_alloc(p->m, sizeof *seq->body);
      seq->body[0] = if_stmt(p, l2);
      seq->n = 1;
      s->otherwise = seq;
    } else {
      s->otherwise = tblock(p);
    }
  }
  return s;
}

/* `name[i...]`, the buffer and indices a store (or async_copy) writes, into s. */
static void store_target(P *p, rx_stmt *s, const char *what) {
  rx_tok *t = cur(p);
  if (t->kind != RX_TOK_IDENT || ahead(p, 1)->kind != RX_TOK_LBRACKET)
    fail_expected(p, "a buffer element 'buf[i, ...]'");
  const char *name = tok_text(p, t);
  tname *tn = lookup_tname(p, name);
  if (!tn || !tn->buf) fail_at(p, t->loc, "undefined buffer '%s' (%s)", name, what);
  next(p);
  next(p);
  s->buf = tn->buf;
  s->nidx = index_list(p, &s->idx);
}

/* `[i]` after a fragment operand of mma or ldmatrix: the row of its indexed form (ir.h). */
static rx_tx *frag_row(P *p, const char *stmt) {
  expect(p, RX_TOK_LBRACKET, "'[' and the fragment's row");
  rx_tx **idx = NULL;
  rx_loc loc = cur(p)->loc;
  if (index_list(p, &idx) != 1) fail_at(p, loc, "a fragment of %s takes one index, its row", stmt);
  return idx[0];
}

/* After `ldmatrix`: `xN [trans] frag = buf[i...]`. */
static rx_stmt *ldmatrix_stmt(P *p, rx_loc loc) {
  rx_stmt *s = rx_stmt_new(p->m, RX_STMT_LDMATRIX, loc);
  rx_tok *w = cur(p);
  static const char *const widths[3] = {"x1", "x2", "x4"};
  for (int i = 0; i < 3; i++)
    if (tok_is_kw(w, widths[i])) s->count = 1 << i;
  if (!s->count) fail_expected(p, "the number of matrices of ldmatrix (x1, x2 or x4)");
  next(p);
  s->trans = accept_kw(p, "trans");
  rx_tok *nt = cur(p);
  if (nt->kind != RX_TOK_IDENT) fail_expected(p, "the fragment ldmatrix loads into");
  const char *name = tok_text(p, nt);
  tname *tn = lookup_tname(p, name);
  if (!tn || !tn->buf)
    fail_at(p, nt->loc, "undefined buffer '%s' (the fragment of ldmatrix)", name);
  s->buf = tn->buf;
  next(p);
  if (cur(p)->kind == RX_TOK_LBRACKET) { /* indexed form `frag[i]` (ir.h) */
    s->idx = rx_arena_alloc(&p->m->arena, sizeof *s->idx);
    s->idx[0] = frag_row(p, "ldmatrix");
    s->nidx = 1;
  }
  expect(p, RX_TOK_ASSIGN, "'=' and the lane's row address 'buf[i, ...]' of ldmatrix");
  s->value = tx(p);
  return s;
}

static rx_stmt *tstmt(P *p) {
  rx_tok *t = cur(p);
  rx_loc loc = t->loc;
  rx_module *m = p->m;
  rx_stmt *s;
  enter(p);
  if (accept_kw(p, "for")) {
    s = for_stmt(p, loc);
  } else if (accept_kw(p, "reduce")) {
    s = reduce_stmt(p, loc);
  } else if (accept_kw(p, "if")) {
    s = if_stmt(p, loc);
  } else if (accept_kw(p, "barrier")) {
    s = rx_stmt_new(m, RX_STMT_BARRIER, loc);
  } else if (is_kw(p, "mma") && tok_is_kw(ahead(p, 1), "m16n8k16")) {
    next(p); /* `mma m16n8k16 c, a, b` (ir.h, RX_STMT_MMA) */
    next(p);
    s = rx_stmt_new(m, RX_STMT_MMA, loc);
    s->buf = buf_operand(p, "the accumulator C", "mma");
    bool rows = cur(p)->kind == RX_TOK_LBRACKET; /* indexed form `c[i], a[j], b[k]` (ir.h) */
    rx_tx *row[3] = {0};
    if (rows) row[0] = frag_row(p, "mma");
    expect(p, RX_TOK_COMMA, "',' and the next operand of mma");
    s->mma_a = buf_operand(p, "the fragment of A", "mma");
    if (rows) row[1] = frag_row(p, "mma");
    expect(p, RX_TOK_COMMA, "',' and the next operand of mma");
    s->mma_b = buf_operand(p, "the fragment of B", "mma");
    if (rows) {
      row[2] = frag_row(p, "mma");
      s->nidx = 3;
      s->idx = rx_arena_alloc(&m->arena, 3 * sizeof *s->idx);
      memcpy(s->idx, row, sizeof row);
    }
  } else if (is_kw(p, "frag") && ahead(p, 1)->kind == RX_TOK_IDENT) {
    s = frag_stmt(p, loc);
  } else if (is_kw(p, "let") && tok_is_kw(ahead(p, 1), "sym") &&
             ahead(p, 2)->kind == RX_TOK_IDENT) {
    next(p);
    next(p);
    const char *name = def_name(p, "the name of the symbolic let");
    expect(p, RX_TOK_ASSIGN, "'=' and the value of the symbolic let");
    rx_loc vloc = cur(p)->loc;
    rx_tx *v = tx(p);
    if (!rx_dtype_is_int(v->dtype))
      fail_at(p, vloc, "a symbolic let needs an integer value, found %s", rx_dtype_name(v->dtype));
    s = sym_let(p, name, v, loc);
  } else if (accept_kw(p, "let")) {
    s = rx_stmt_new(m, RX_STMT_LET, loc);
    rx_loc nloc = cur(p)->loc;
    const char *name = def_name(p, "the name of the local");
    rx_local *l = rx_module_alloc(m, sizeof *l);
    l->name = name;
    l->loc = nloc;
    bool typed = accept(p, RX_TOK_COLON);
    if (typed) l->dtype = dtype(p, false);
    expect(p, RX_TOK_ASSIGN, "'=' and the value of the local");
    s->value = tx(p);
    if (!typed) l->dtype = s->value->dtype;
    s->local = l;
    define_tname(p, name, l, NULL, nloc);
  } else if (accept_kw(p, "alloc")) {
    s = rx_stmt_new(m, RX_STMT_ALLOC, loc);
    rx_loc nloc = cur(p)->loc;
    const char *name = def_name(p, "the name of the allocation");
    expect(p, RX_TOK_COLON, "':' and the type of the allocation");
    rx_scope scope = RX_SCOPE_GLOBAL;
    s->buf = buffer_decl(p, name, nloc, scope);
    if (accept_kw(p, "shared"))
      s->buf->scope = RX_SCOPE_SHARED;
    else if (accept_kw(p, "local"))
      s->buf->scope = RX_SCOPE_LOCAL;
    else if (accept_kw(p, "fragment"))
      frag_use(p, s->buf);
    else
      accept_kw(p, "global");
    define_tname(p, name, NULL, s->buf, nloc);
  } else if (is_kw(p, "async_copy") && ahead(p, 1)->kind == RX_TOK_IDENT) {
    next(p); /* `async_copy dst[i...] = src[j...] [if cond]` (ir.h, RX_STMT_ASYNC_COPY) */
    s = rx_stmt_new(m, RX_STMT_ASYNC_COPY, loc);
    store_target(p, s, "async_copy");
    expect(p, RX_TOK_ASSIGN, "'=' and the source of async_copy");
    s->value = tx(p);
    if (accept_kw(p, "if")) s->cond = tx(p);
  } else if (is_kw(p, "async_commit") && ahead(p, 1)->kind != RX_TOK_LBRACKET) {
    next(p);
    s = rx_stmt_new(m, RX_STMT_ASYNC_COMMIT, loc);
  } else if (is_kw(p, "async_wait") && ahead(p, 1)->kind == RX_TOK_INT) {
    next(p);
    s = rx_stmt_new(m, RX_STMT_ASYNC_WAIT, loc);
    rx_loc nloc = cur(p)->loc;
    int64_t n = int_lit(p, "the number of groups async_wait leaves in flight");
    if (n > 64)
      fail_at(p, nloc, "async_wait leaves at most 64 groups in flight (got %lld)", (long long)n);
    s->count = (int)n;
  } else if (is_kw(p, "ldmatrix") && ahead(p, 1)->kind == RX_TOK_IDENT) {
    next(p); /* `ldmatrix xN [trans] frag = buf[i...]` (ir.h, RX_STMT_LDMATRIX) */
    s = ldmatrix_stmt(p, loc);
  } else if (t->kind == RX_TOK_IDENT && ahead(p, 1)->kind == RX_TOK_LBRACKET && !is_keyword(t)) {
    s = rx_stmt_new(m, RX_STMT_STORE, loc);
    store_target(p, s, "a store");
    expect(p, RX_TOK_ASSIGN, "'=' and the value to store");
    s->value = tx(p);
  } else {
    fail_expected(p, "a statement (for, reduce, if, let, alloc, barrier, mma, frag, async_copy, "
                     "async_commit, async_wait, ldmatrix or a store 'buf[i] = v')");
  }
  end_stmt(p, "a statement");
  leave(p);
  return s;
}

/* `{ STATEMENT... }` as a SEQ; lets and allocs are visible to the rest of the block only. */
static rx_stmt *tblock(P *p) {
  rx_tok *open = cur(p);
  expect(p, RX_TOK_LBRACE, "'{' to start a block");
  enter(p);
  int mark = p->tvis.n;
  rx_stmt *seq = rx_stmt_new(p->m, RX_STMT_SEQ, open->loc);
  AVEC(rx_stmt *) body = {0};
  while (!accept(p, RX_TOK_RBRACE)) {
    if (is(p, RX_TOK_EOF)) fail_at(p, open->loc, "unterminated block: expected '}'");
    APUSH(p, &body, tstmt(p));
  }
  p->tvis.n = mark;
  leave(p);
  seq->body = body.d;
  seq->n = body.n;
  return seq;
}

/* Does an extern parameter's type start here as a graph struct info that is not a buffer or a
 * scalar: Object, Prim(..), Shape, a tuple, or a tensor of unknown shape (f32[ndim=2], f32[...])?
 */
static bool value_type_ahead(P *p) {
  rx_tok *t = cur(p);
  if (t->kind == RX_TOK_LPAREN) return true;
  if (tok_is_kw(t, "Object") || tok_is_kw(t, "Prim") || tok_is_kw(t, "Shape")) return true;
  if (ahead(p, 1)->kind != RX_TOK_LBRACKET) return false;
  rx_tok *in = ahead(p, 2);
  return in->kind == RX_TOK_ELLIPSIS ||
         (tok_is_kw(in, "ndim") && ahead(p, 3)->kind == RX_TOK_ASSIGN);
}

/* Parameters of tensor programs and (ext) extern functions, which may also take values. */
static int tparams(P *p, rx_param ***out, bool ext) {
  AVEC(rx_param *) v = {0};
  expect(p, RX_TOK_LPAREN, "'(' to start the parameters");
  while (!accept(p, RX_TOK_RPAREN)) {
    rx_param *q = rx_module_alloc(p->m, sizeof *q);
    q->loc = cur(p)->loc;
    q->is_output = accept_kw(p, "out");
    rx_loc nloc = cur(p)->loc;
    const char *name = def_name(p, "a parameter name");
    expect(p, RX_TOK_COLON, "':' and the type of the parameter");
    if (ext && value_type_ahead(p)) {
      if (q->is_output)
        fail_at(p, q->loc,
                "an 'out' parameter must be a buffer like f32[n] (an extern that "
                "makes its result declares it with '-> STRUCT_INFO')");
      q->kind = RX_PARAM_VALUE;
      q->name = name;
      q->sinfo = sinfo(p);
    } else if (ahead(p, 1)->kind == RX_TOK_LBRACKET) {
      q->kind = RX_PARAM_BUFFER;
      q->buf = buffer_decl(p, name, nloc, RX_SCOPE_GLOBAL);
      define_tname(p, name, NULL, q->buf, nloc);
    } else {
      if (q->is_output) fail_at(p, q->loc, "an 'out' parameter must be a buffer like f32[n]");
      q->kind = RX_PARAM_SCALAR;
      q->dtype = dtype(p, false);
      q->var = rx_expr_var(p->m->ctx, name); /* a symbolic variable, not a buffer */
    }
    APUSH(p, &v, q);
    if (accept(p, RX_TOK_RPAREN)) break;
    expect(p, RX_TOK_COMMA, "',' or ')' after a parameter");
  }
  /* scalar parameter names must not repeat either */
  for (int a = 0; a < v.n; a++)
    for (int b = a + 1; b < v.n; b++) {
      const char *na = rx_param_name(v.d[a]), *nb = rx_param_name(v.d[b]);
      if (na == nb)
        fail_at(p, v.d[b]->loc, "duplicate name '%s': first defined at line %u, column %u", na,
                v.d[a]->loc.line, v.d[a]->loc.col);
    }
  *out = v.d;
  return v.n;
}

static void tensor_fn(P *p, rx_loc loc) {
  rx_tensor_fn *f = rx_module_alloc(p->m, sizeof *f);
  f->loc = loc;
  f->name = def_name(p, "the name of the tensor program");
  p->tvis.n = 0;
  f->nparams = tparams(p, &f->params, false);
  f->nfacts = facts(p, &f->facts, &f->fact_locs);
  f->body = tblock(p);
  rx_item it = {RX_ITEM_TENSOR, f};
  RX_VEC_PUSH(&p->m->items, it);
}

static void extern_fn(P *p, rx_loc loc, bool impure) {
  rx_extern_fn *f = rx_module_alloc(p->m, sizeof *f);
  f->loc = loc;
  f->impure = impure;
  f->name = def_name(p, "the name of the extern function");
  p->tvis.n = 0;
  f->nparams = tparams(p, &f->params, true);
  if (accept(p, RX_TOK_ARROW)) {
    for (int i = 0; i < f->nparams; i++)
      if (f->params[i]->is_output)
        fail_at(p, f->params[i]->loc,
                "an extern with '-> STRUCT_INFO' returns its result and has no 'out' parameter");
    f->ret = sinfo(p);
  }
  rx_item it = {RX_ITEM_EXTERN, f};
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

static void item(P *p) {
  rx_tok *t = cur(p);
  rx_loc loc = t->loc;
  size_t before = p->m->items.len;
  if (accept_kw(p, "graph_fn")) {
    graph_fn(p, loc);
  } else if (accept_kw(p, "tensor_fn")) {
    tensor_fn(p, loc);
  } else if (accept_kw(p, "impure")) {
    if (!accept_kw(p, "extern_fn")) fail_expected(p, "'extern_fn' after 'impure'");
    extern_fn(p, loc, true);
  } else if (accept_kw(p, "extern_fn")) {
    extern_fn(p, loc, false);
  } else {
    fail_expected(p, "'graph_fn', 'tensor_fn' or 'extern_fn'");
  }
  rx_tok *after = &p->t[p->i]; /* raw: a lexical error there belongs to what follows */
  if (after->kind != RX_TOK_EOF && !after->nl)
    fail_at(p, after->loc, "expected end of line after the definition, found %s",
            rx_tok_describe(p->m, after));
  /* the name must be new in the module */
  RX_ASSERT(p->m->items.len == before + 1);
  rx_item *it = &p->m->items.data[before];
  for (size_t k = 0; k < before; k++) {
    rx_item *o = &p->m->items.data[k];
    if (item_name(o) == item_name(it)) {
      p->m->items.len = before;
      rx_loc ol = item_loc(o);
      fail_at(p, item_loc(it), "redefinition of '%s': first defined at line %u, column %u",
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
  while (p->t[p->i].kind != RX_TOK_EOF && !(p->t[p->i].nl && is_item_start(&p->t[p->i]))) next(p);
}

static void resolve(P *p) {
  for (int k = 0; k < p->unresolved.n; k++) {
    rx_node *n = p->unresolved.d[k];
    switch (n->kind) {
    case RX_NODE_CALL_TENSOR:
      n->tfn = rx_module_tensor_fn(p->m, n->callee);
      if (!n->tfn)
        rx_diag_report(p->diag, RX_DIAG_ERROR, n->loc, "unknown tensor program '%s'", n->callee);
      break;
    case RX_NODE_CALL_EXTERN:
      n->ext = rx_module_extern_fn(p->m, n->callee);
      if (!n->ext)
        rx_diag_report(p->diag, RX_DIAG_ERROR, n->loc, "unknown extern function '%s'", n->callee);
      else if (!n->out && n->ext->ret)
        n->out = n->ext->ret; /* a returning extern: its declared result */
      else if (!n->out)
        rx_diag_report(p->diag, RX_DIAG_ERROR, n->loc,
                       "call_extern(%s) requires out=STRUCT_INFO: '%s' is destination-passing",
                       n->callee, n->callee);
      break;
    case RX_NODE_CALL_GRAPH:
      n->gfn = rx_module_graph_fn(p->m, n->callee);
      if (!n->gfn)
        rx_diag_report(p->diag, RX_DIAG_ERROR, n->loc, "graph function '%s' is not defined",
                       n->callee);
      break;
    default:
      RX_ASSERT(!"unexpected node to resolve");
    }
  }
}

bool rx_parse_module(rx_module *m, const char *name, const char *text, size_t len, rx_diag *diag) {
  int errors = diag->errors;
  rx_source *src = rx_module_alloc(m, sizeof *src);
  src->name = rx_arena_strdup(&m->arena, name ? name : "<input>");
  src->text = rx_arena_strndup(&m->arena, text ? text : "", text ? len : 0);
  src->len = text ? len : 0;
  RX_VEC_PUSH(&m->sources, src);
  if (src->len > (size_t)UINT32_MAX / 2) {
    rx_diag_report(diag, RX_DIAG_ERROR, (rx_loc){0}, "%s: source too large", src->name);
    return false;
  }
  P p = {.m = m, .diag = diag};
  if (!rx_lex(m, src, diag, &p.t, &p.n)) return false;
  for (int k = 0; k + 1 < p.n; k++)
    if (tok_is_kw(&p.t[k], "graph_fn") && p.t[k + 1].kind == RX_TOK_IDENT)
      APUSH(&p, &p.gnames, tok_text(&p, &p.t[k + 1]));
  while (p.t[p.i].kind != RX_TOK_EOF) guarded_item(&p);
  rx_ptrmap_free(&p.defined_at);
  rx_ptrmap_free(&p.visible_at);
  resolve(&p);
  return diag->errors == errors;
}
