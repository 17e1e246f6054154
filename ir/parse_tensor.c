/* The parser of the text format, continued (ir/parser.c has the rest and the error
 * handling): tensor programs (loop IR: parameters, loops, reductions, stores, lets,
 * allocations, fragments, tensor-program expressions) and extern declarations. */
#include "parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    ir_parse_fail_at(p, loc, "duplicate name '%s': first defined at line %u, column %u", name,
                     ol.line, ol.col);
  }
  tname t = {name, l, b};
  APUSH(p, &p->tvis, t);
}

static rx_tx *tx(P *p);
static int index_list(P *p, rx_tx ***out);

/* A test of the target's units (ir.h, RX_TX_HAS_FRAG), at its name: `has_async_copy()`, or
 * `has_fragments(AB, ACC, M, N, K)` / `has_mma(AB, ACC, M, N, K)`. */
static rx_tx *target_test(P *p, rx_target_test test) {
  rx_loc loc = cur(p)->loc;
  const char *what = ir_target_test_name(test);
  next(p);
  next(p);
  if (test == RX_TEST_ASYNC_COPY) {
    ir_parse_expect(p, RX_TOK_RPAREN, "')' after has_async_copy(");
    return ir_tx_has_frag(p->m, test, RX_DTYPE_UNKNOWN, RX_DTYPE_UNKNOWN, 0, 0, 0, loc);
  }
  rx_dtype dt[2];
  int dims[3];
  char msg[96];
  for (int i = 0; i < 5; i++) {
    rx_tok *t = cur(p);
    if (i < 2) {
      bool is_dt = false;
      if (t->kind == RX_TOK_IDENT) dt[i] = ir_parse_dtype_of(p, t, &is_dt);
      snprintf(msg, sizeof msg, "the %s dtype of %s", i ? "accumulator" : "operand", what);
      if (!is_dt || dt[i] == RX_DTYPE_UNKNOWN) ir_parse_fail_expected(p, msg);
    } else {
      snprintf(msg, sizeof msg, "a fragment dimension (an integer) of %s", what);
      if (t->kind != RX_TOK_INT) ir_parse_fail_expected(p, msg);
      int64_t v = ir_parse_int_value(p, t, false);
      if (v < 1 || v > 256)
        ir_parse_fail_at(p, t->loc, "a fragment dimension is 1 to 256, got %lld", (long long)v);
      dims[i - 2] = (int)v;
    }
    next(p);
    snprintf(msg, sizeof msg, "',' between the arguments of %s", what);
    if (i < 4) ir_parse_expect(p, RX_TOK_COMMA, msg);
  }
  snprintf(msg, sizeof msg, "')' after the five arguments of %s(AB, ACC, M, N, K)", what);
  ir_parse_expect(p, RX_TOK_RPAREN, msg);
  return ir_tx_has_frag(p->m, test, dt[0], dt[1], dims[0], dims[1], dims[2], loc);
}

static rx_tx *tx_primary(P *p) {
  rx_tok *t = cur(p);
  rx_module *m = p->m;
  rx_loc loc = t->loc;
  if (t->kind == RX_TOK_INT) {
    int64_t v = ir_parse_int_value(p, t, false);
    next(p);
    return ir_tx_int(m, v, RX_DTYPE_I64, true, loc);
  }
  if (t->kind == RX_TOK_FLOAT) {
    next(p);
    return ir_tx_float(m, t->f, RX_DTYPE_F32, true, loc);
  }
  if (t->kind == RX_TOK_LPAREN) {
    next(p);
    p->nest++;
    rx_tx *e = tx(p);
    ir_parse_expect(p, RX_TOK_RPAREN, "')' to close '('");
    p->nest--;
    return e;
  }
  if (t->kind != RX_TOK_IDENT) ir_parse_fail_expected(p, "an expression");
  if (accept_kw(p, "true") || accept_kw(p, "false"))
    return ir_tx_int(m, tok_is_kw(t, "true"), RX_DTYPE_BOOL, true, loc);
  const char *name = tok_text(p, t);
  rx_tok_kind after = ahead(p, 1)->kind;
  for (int i = 0; after == RX_TOK_LPAREN && i < RX_TEST_COUNT; i++)
    if (tok_is_kw(t, ir_target_test_name((rx_target_test)i)))
      return target_test(p, (rx_target_test)i);
  if (after == RX_TOK_LPAREN) {
    bool is_dt;
    rx_dtype dt = ir_parse_dtype_of(p, t, &is_dt);
    rx_intrinsic in = RX_INTRIN_EXP;
    int arity;
    if (is_dt) {
      if (dt == RX_DTYPE_UNKNOWN) ir_parse_fail_at(p, loc, "cannot cast to 'any'");
      arity = 1;
    } else if (tok_is_kw(t, "select")) {
      arity = 3;
    } else if (ir_intrinsic_lookup(name, strlen(name), &in)) {
      arity = ir_intrinsic_arity(in);
    } else {
      ir_parse_fail_at(p, loc, "unknown intrinsic '%s'", name);
    }
    next(p);
    next(p);
    p->nest++;
    rx_tx *a[3] = {0};
    int n = 0;
    if (!accept(p, RX_TOK_RPAREN)) {
      for (;;) {
        if (n == arity)
          ir_parse_fail_at(p, cur(p)->loc, "'%s' takes %d argument%s", name, arity,
                           arity == 1 ? "" : "s");
        a[n++] = tx(p);
        if (!is_dt && n == arity && ir_intrinsic_kind(in) == 'c') break; /* the message next */
        if (ir_parse_arg_sep(p)) break;
      }
    }
    const char *msg = NULL;
    if (!is_dt && n == arity && ir_intrinsic_kind(in) == 'c') {
      if (!accept(p, RX_TOK_COMMA) || !is(p, RX_TOK_STRING))
        ir_parse_fail_expected(p, "',' and the check's message (a string)");
      msg = cur(p)->s;
      next(p);
      ir_parse_expect(p, RX_TOK_RPAREN, "')' after the check's message");
    }
    p->nest--;
    if (n != arity)
      ir_parse_fail_at(p, loc, "'%s' takes %d argument%s, found %d", name, arity,
                       arity == 1 ? "" : "s", n);
    if (is_dt) return ir_tx_cast(m, dt, a[0], loc);
    if (arity == 3 && tok_is_kw(t, "select")) return ir_tx_select(m, a[0], a[1], a[2], loc);
    rx_tx *c = ir_tx_call(m, in, a, n, loc);
    if (msg && c->kind == RX_TX_CALL) c->msg = msg;
    return c;
  }
  if (ir_parse_is_keyword(t))
    ir_parse_fail_at(p, loc, "expected an expression, found keyword %s", ir_tok_describe(m, t));
  next(p);
  tname *tn = lookup_tname(p, name);
  if (after == RX_TOK_LBRACKET) {
    if (!tn || !tn->buf) ir_parse_fail_at(p, loc, "undefined buffer '%s'", name);
    next(p);
    rx_tx **idx;
    int n = index_list(p, &idx);
    return ir_tx_load(m, tn->buf, idx, n, loc);
  }
  if (tn && tn->local) return ir_tx_local(m, tn->local, loc);
  if (tn)
    ir_parse_fail_at(p, loc, "buffer '%s' used without indices: expected '%s[...]'", name, name);
  return ir_tx_sym(m, sym_expr_var(m->ctx, name), loc);
}

static rx_tx *tx_unary(P *p) {
  rx_tok *t = cur(p);
  if (t->kind != RX_TOK_MINUS) return tx_primary(p);
  next(p);
  rx_tok *nt = cur(p);
  if (nt->kind == RX_TOK_INT) {
    int64_t v = ir_parse_int_value(p, nt, true);
    next(p);
    return ir_tx_int(p->m, v, RX_DTYPE_I64, true, t->loc);
  }
  if (nt->kind == RX_TOK_FLOAT) {
    next(p);
    return ir_tx_float(p->m, -nt->f, RX_DTYPE_F32, true, t->loc);
  }
  ir_parse_enter(p);
  rx_tx *e = ir_tx_neg(p->m, tx_unary(p), t->loc);
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
    if (!ir_parse_cmp_tok(cur(p)->kind, NULL, op)) return false;
  }
  return ir_binop_precedence(*op) == level && op_here(p);
}

static rx_tx *tx_level(P *p, int level) {
  if (level == 7) return tx_unary(p);
  if (level == 3) {
    if (!is(p, RX_TOK_BANG)) return tx_level(p, 4);
    rx_loc loc = cur(p)->loc;
    next(p);
    ir_parse_enter(p);
    rx_tx *e = ir_tx_not(p->m, tx_level(p, 3), loc);
    leave(p);
    return e;
  }
  rx_tx *a = tx_level(p, level + 1);
  rx_binop op;
  for (int k = 0; binop_at(p, level, &op); k++) {
    rx_loc loc = cur(p)->loc;
    if (k > MAX_CHAIN) ir_parse_fail_at(p, loc, "expression too long");
    next(p);
    a = ir_tx_binary(p->m, op, a, tx_level(p, level + 1), loc);
  }
  return a;
}

static rx_tx *tx(P *p) {
  ir_parse_enter(p);
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
  rx_stmt *s = ir_stmt_new(p->m, RX_STMT_LET, loc);
  rx_local *l = ir_module_alloc(p->m, sizeof *l);
  APUSH(p, &p->symlets, name);
  l->name = name;
  l->loc = loc;
  l->dtype = RX_DTYPE_I64;
  l->sym = sym_expr_var(p->m->ctx, name);
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
    const char *n = ir_module_intern(p->m, buf, strlen(buf));
    bool taken = lookup_tname(p, n) != NULL;
    for (int i = 0; i < p->symlets.n && !taken; i++) taken = p->symlets.d[i] == n;
    if (!taken) return n;
  }
}

/* One bound of a range: a symbolic expression, or (when it loads) a symbolic let appended to
 * *lets, whose variable is the bound. */
static const rx_expr *bound(P *p, const char *var, const char *what, rx_stmt **lets, int *nlets) {
  if (!bound_loads(p)) return ir_parse_sym(p);
  rx_loc loc = cur(p)->loc;
  rx_tx *v = tx(p);
  if (v->kind == RX_TX_SYM) return v->sym;
  if (!ir_dtype_is_int(v->dtype))
    ir_parse_fail_at(p, loc, "a loop bound that loads must be an integer, found %s",
                     ir_dtype_name(v->dtype));
  rx_stmt *s = sym_let(p, bound_name(p, var, what), v, loc);
  lets[(*nlets)++] = s;
  return s->local->sym;
}

/* `var in lo..hi`; a bound with a load becomes a symbolic let (at most two, in lets). */
static void range(P *p, const rx_expr **var, const rx_expr **lo, const rx_expr **extent,
                  rx_stmt **lets, int *nlets) {
  const char *name = ir_parse_def_name(p, "a loop variable");
  *var = sym_expr_var(p->m->ctx, name);
  if (!accept_kw(p, "in")) ir_parse_fail_expected(p, "'in' after the loop variable");
  *lo = bound(p, name, "lo", lets, nlets);
  ir_parse_expect(p, RX_TOK_DOTDOT, "'..' between the bounds of a range");
  *extent = sym_expr_sub(p->m->ctx, bound(p, name, "hi", lets, nlets), *lo);
}

/* `bind(threadIdx.x, blocks=N)`: the blocks per SM the schedule assumes (rx_stmt.count). */
static int loop_blocks(P *p, rx_loop_kind k) {
  if (k != RX_LOOP_THREAD_X || !accept(p, RX_TOK_COMMA)) return 0;
  if (!accept_kw(p, "blocks")) ir_parse_fail_expected(p, "'blocks=N' after the bound axis");
  ir_parse_expect(p, RX_TOK_ASSIGN, "'=' after 'blocks'");
  rx_tok *t = cur(p);
  if (t->kind != RX_TOK_INT) ir_parse_fail_expected(p, "the blocks per SM (an integer)");
  int64_t v = ir_parse_int_value(p, t, false);
  if (v < 1 || v > 64)
    ir_parse_fail_at(p, t->loc, "blocks per SM is 1 to 64, got %lld", (long long)v);
  next(p);
  return (int)v;
}

static rx_loop_kind loop_kind(P *p, int *blocks) {
  if (accept_kw(p, "unroll")) return RX_LOOP_UNROLL;
  if (accept_kw(p, "vectorize")) return RX_LOOP_VECTORIZE;
  if (accept_kw(p, "serial")) return RX_LOOP_SERIAL;
  if (accept_kw(p, "rolled")) return RX_LOOP_ROLLED;
  if (!accept_kw(p, "bind")) return RX_LOOP_SERIAL;
  ir_parse_expect(p, RX_TOK_LPAREN, "'(' after 'bind'");
  for (int k = RX_LOOP_BLOCK_X; k < RX_LOOP_KIND_COUNT; k++) {
    if (accept_kw(p, ir_loop_kind_name((rx_loop_kind)k))) {
      *blocks = loop_blocks(p, (rx_loop_kind)k);
      ir_parse_expect(p, RX_TOK_RPAREN, "')' after the bound axis");
      return (rx_loop_kind)k;
    }
  }
  ir_parse_fail_expected(p, "a thread axis (blockIdx.x/y/z or threadIdx.x/y/z)");
}

/* A SEQ of the statements st[0..n). */
static rx_stmt *seq_of(P *p, rx_stmt *const *st, int n, rx_loc loc) {
  rx_stmt *seq = ir_stmt_new(p->m, RX_STMT_SEQ, loc);
  seq->body = ir_module_alloc(p->m, sizeof *seq->body * (size_t)n);
  memcpy(seq->body, st, sizeof *seq->body * (size_t)n);
  seq->n = n;
  return seq;
}

static rx_stmt *for_stmt(P *p, rx_loc loc) {
  AVEC(rx_stmt *) loops = {0};
  AVEC(rx_stmt *) heads = {0}; /* per loop: the loop, or a SEQ of its bounds' lets and it */
  do {
    rx_stmt *s = ir_stmt_new(p->m, RX_STMT_FOR, cur(p)->loc);
    s->vars = ir_module_alloc(p->m, sizeof *s->vars);
    s->lo = ir_module_alloc(p->m, sizeof *s->lo);
    s->extent = ir_module_alloc(p->m, sizeof *s->extent);
    s->nvars = 1;
    rx_stmt *st[3];
    int nlets = 0;
    range(p, &s->vars[0], &s->lo[0], &s->extent[0], st, &nlets);
    s->loop_kind = loop_kind(p, &s->count);
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
  rx_stmt *s = ir_stmt_new(p->m, RX_STMT_REDUCE, loc);
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
  ir_parse_expect(p, RX_TOK_LBRACE, "'{' to start the reduction");
  if (!accept_kw(p, "init")) ir_parse_fail_expected(p, "'init { ... }' in a reduction");
  s->init = tblock(p);
  if (!accept_kw(p, "update")) ir_parse_fail_expected(p, "'update { ... }' after 'init { ... }'");
  s->inner = tblock(p);
  if (!accept(p, RX_TOK_RBRACE)) {
    if (is(p, RX_TOK_EOF)) ir_parse_fail_at(p, open->loc, "unterminated reduction: expected '}'");
    ir_parse_fail_expected(p, "'}' to close the reduction");
  }
  if (!lets.n) return s;
  APUSH(p, &lets, s);
  return seq_of(p, lets.d, lets.n, loc);
}

/* An operand of mma or frag that names a buffer. */
static rx_buffer *buf_operand(P *p, const char *what, const char *stmt) {
  rx_tok *nt = cur(p);
  if (nt->kind != RX_TOK_IDENT) ir_parse_fail_expected(p, what);
  const char *name = tok_text(p, nt);
  tname *tn = lookup_tname(p, name);
  if (!tn || !tn->buf)
    ir_parse_fail_at(p, nt->loc, "undefined buffer '%s' (%s of %s)", name, what, stmt);
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
    ir_parse_expect(p, RX_TOK_COMMA, "',' or ']' after an index");
  }
  p->nest--;
  *out = idx.d;
  return idx.n;
}

/* `fragment USE` after an alloc's type (ir.h, RX_STMT_FRAG): a subgroup matrix fragment. */
static void frag_use(P *p, rx_buffer *b) {
  b->scope = RX_SCOPE_LOCAL;
  for (int u = RX_FRAG_A; u < RX_FRAG_USE_COUNT; u++)
    if (accept_kw(p, ir_frag_use_name((rx_frag_use)u))) {
      b->frag = (rx_frag_use)u;
      return;
    }
  ir_parse_fail_expected(p, "the use of the fragment after 'fragment': a, b or acc");
}

/* `frag OP ...` (ir.h, RX_STMT_FRAG), at `frag`. */
static rx_stmt *frag_stmt(P *p, rx_loc loc) {
  next(p);
  rx_tok *ot = cur(p);
  int op = 0;
  while (op < RX_FRAG_OP_COUNT && !tok_is_kw(ot, ir_frag_op_name((rx_frag_op)op))) op++;
  if (op == RX_FRAG_OP_COUNT) ir_parse_fail_expected(p, "fill, load, mma or store after 'frag'");
  next(p);
  rx_stmt *s = ir_stmt_new(p->m, RX_STMT_FRAG, loc);
  s->frag_op = (rx_frag_op)op;
  s->buf = buf_operand(p, op == RX_FRAG_OP_MMA ? "the fragment of D" : "the fragment", "frag");
  ir_parse_expect(p, RX_TOK_COMMA, "',' and the next operand of frag");
  switch (s->frag_op) {
  case RX_FRAG_OP_FILL:
    s->value = tx(p);
    break;
  case RX_FRAG_OP_MMA:
    s->mma_a = buf_operand(p, "the fragment of A", "frag mma");
    ir_parse_expect(p, RX_TOK_COMMA, "',' and the fragment of B");
    s->mma_b = buf_operand(p, "the fragment of B", "frag mma");
    ir_parse_expect(p, RX_TOK_COMMA, "',' and the fragment of C");
    s->mma_c = buf_operand(p, "the fragment of C", "frag mma");
    break;
  case RX_FRAG_OP_LOAD:
  case RX_FRAG_OP_STORE:
    s->mem = buf_operand(p, "the buffer in memory", "frag");
    ir_parse_expect(p, RX_TOK_LBRACKET, "'[' and the index of the fragment's first element");
    s->nidx = index_list(p, &s->idx);
    ir_parse_expect(p, RX_TOK_COMMA, "',' and the stride (elements between rows)");
    s->value = tx(p);
    if (accept(p, RX_TOK_COMMA)) {
      if (!accept_kw(p, "col_major")) ir_parse_fail_expected(p, "'col_major' after the stride");
      s->col_major = true;
    }
    break;
  case RX_FRAG_OP_COUNT:
    break;
  }
  return s;
}

static rx_buffer *buffer_decl(P *p, const char *name, rx_loc loc, rx_scope scope) {
  rx_buffer *b = ir_module_alloc(p->m, sizeof *b);
  b->name = name;
  b->loc = loc;
  b->scope = scope;
  b->dtype = ir_parse_dtype(p, true);
  ir_parse_expect(p, RX_TOK_LBRACKET, "'[' and the shape of the buffer");
  b->ndim = ir_parse_sym_list(p, &b->shape, RX_TOK_RBRACKET, "',' or ']' in the shape of a buffer");
  return b;
}

static rx_stmt *if_stmt(P *p, rx_loc loc) {
  rx_stmt *s = ir_stmt_new(p->m, RX_STMT_IF, loc);
  s->value = tx(p);
  s->inner = tblock(p);
  if (accept_kw(p, "else")) {
    if (is_kw(p, "if")) {
      rx_loc l2 = cur(p)->loc;
      next(p);
      rx_stmt *seq = ir_stmt_new(p->m, RX_STMT_SEQ, l2);
      seq->body = ir_module_alloc(p->m, sizeof *seq->body);
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
    ir_parse_fail_expected(p, "a buffer element 'buf[i, ...]'");
  const char *name = tok_text(p, t);
  tname *tn = lookup_tname(p, name);
  if (!tn || !tn->buf) ir_parse_fail_at(p, t->loc, "undefined buffer '%s' (%s)", name, what);
  next(p);
  next(p);
  s->buf = tn->buf;
  s->nidx = index_list(p, &s->idx);
}

/* `[i]` after a fragment operand of mma or ldmatrix: the row of its indexed form (ir.h). */
static rx_tx *frag_row(P *p, const char *stmt) {
  ir_parse_expect(p, RX_TOK_LBRACKET, "'[' and the fragment's row");
  rx_tx **idx = NULL;
  rx_loc loc = cur(p)->loc;
  if (index_list(p, &idx) != 1)
    ir_parse_fail_at(p, loc, "a fragment of %s takes one index, its row", stmt);
  return idx[0];
}

/* After `ldmatrix`: `xN [trans] frag = buf[i...]`. */
static rx_stmt *ldmatrix_stmt(P *p, rx_loc loc) {
  rx_stmt *s = ir_stmt_new(p->m, RX_STMT_LDMATRIX, loc);
  rx_tok *w = cur(p);
  static const char *const widths[3] = {"x1", "x2", "x4"};
  for (int i = 0; i < 3; i++)
    if (tok_is_kw(w, widths[i])) s->count = 1 << i;
  if (!s->count) ir_parse_fail_expected(p, "the number of matrices of ldmatrix (x1, x2 or x4)");
  next(p);
  s->trans = accept_kw(p, "trans");
  rx_tok *nt = cur(p);
  if (nt->kind != RX_TOK_IDENT) ir_parse_fail_expected(p, "the fragment ldmatrix loads into");
  const char *name = tok_text(p, nt);
  tname *tn = lookup_tname(p, name);
  if (!tn || !tn->buf)
    ir_parse_fail_at(p, nt->loc, "undefined buffer '%s' (the fragment of ldmatrix)", name);
  s->buf = tn->buf;
  next(p);
  if (cur(p)->kind == RX_TOK_LBRACKET) { /* indexed form `frag[i]` (ir.h) */
    s->idx = base_arena_alloc(&p->m->arena, sizeof *s->idx);
    s->idx[0] = frag_row(p, "ldmatrix");
    s->nidx = 1;
  }
  ir_parse_expect(p, RX_TOK_ASSIGN, "'=' and the lane's row address 'buf[i, ...]' of ldmatrix");
  s->value = tx(p);
  return s;
}

/* `wgmma m64nNk16 [trans] acc, a[i...], b[j...]` after `wgmma` (ir.h, RX_STMT_WGMMA): N in count,
 * trans: B MN-major. */
static rx_stmt *wgmma_stmt(P *p, rx_loc loc) {
  rx_tok *sh = cur(p);
  int n = 0, used = 0;
  const char *name = sh->kind == RX_TOK_IDENT ? tok_text(p, sh) : "";
  if (sscanf(name, "m64n%dk16%n", &n, &used) != 1 || name[used] || n < 8 || n > 256 || n % 8)
    ir_parse_fail_at(p, sh->loc,
                     "wgmma takes the shape m64nNk16 with N a multiple of 8 in 8..256, not '%s'",
                     name);
  next(p);
  rx_stmt *s = ir_stmt_new(p->m, RX_STMT_WGMMA, loc);
  s->count = n;
  s->trans = accept_kw(p, "trans");
  s->buf = buf_operand(p, "the accumulator", "wgmma");
  ir_parse_expect(p, RX_TOK_COMMA, "',' and A's address 'a[i, ...]' of wgmma");
  s->value = tx(p);
  ir_parse_expect(p, RX_TOK_COMMA, "',' and B's address 'b[j, ...]' of wgmma");
  s->wg_b = tx(p);
  return s;
}

static rx_stmt *tstmt(P *p) {
  rx_tok *t = cur(p);
  rx_loc loc = t->loc;
  rx_module *m = p->m;
  rx_stmt *s;
  ir_parse_enter(p);
  if (accept_kw(p, "for")) {
    s = for_stmt(p, loc);
  } else if (accept_kw(p, "reduce")) {
    s = reduce_stmt(p, loc);
  } else if (accept_kw(p, "if")) {
    s = if_stmt(p, loc);
  } else if (accept_kw(p, "barrier")) {
    s = ir_stmt_new(m, RX_STMT_BARRIER, loc);
  } else if (is_kw(p, "mma") && tok_is_kw(ahead(p, 1), "m16n8k16")) {
    next(p); /* `mma m16n8k16 c, a, b` (ir.h, RX_STMT_MMA) */
    next(p);
    s = ir_stmt_new(m, RX_STMT_MMA, loc);
    s->buf = buf_operand(p, "the accumulator C", "mma");
    bool rows = cur(p)->kind == RX_TOK_LBRACKET; /* indexed form `c[i], a[j], b[k]` (ir.h) */
    rx_tx *row[3] = {0};
    if (rows) row[0] = frag_row(p, "mma");
    ir_parse_expect(p, RX_TOK_COMMA, "',' and the next operand of mma");
    s->mma_a = buf_operand(p, "the fragment of A", "mma");
    if (rows) row[1] = frag_row(p, "mma");
    ir_parse_expect(p, RX_TOK_COMMA, "',' and the next operand of mma");
    s->mma_b = buf_operand(p, "the fragment of B", "mma");
    if (rows) {
      row[2] = frag_row(p, "mma");
      s->nidx = 3;
      s->idx = base_arena_alloc(&m->arena, 3 * sizeof *s->idx);
      memcpy(s->idx, row, sizeof row);
    }
  } else if (is_kw(p, "frag") && ahead(p, 1)->kind == RX_TOK_IDENT) {
    s = frag_stmt(p, loc);
  } else if (is_kw(p, "let") && tok_is_kw(ahead(p, 1), "sym") &&
             ahead(p, 2)->kind == RX_TOK_IDENT) {
    next(p);
    next(p);
    const char *name = ir_parse_def_name(p, "the name of the symbolic let");
    ir_parse_expect(p, RX_TOK_ASSIGN, "'=' and the value of the symbolic let");
    rx_loc vloc = cur(p)->loc;
    rx_tx *v = tx(p);
    if (!ir_dtype_is_int(v->dtype))
      ir_parse_fail_at(p, vloc, "a symbolic let needs an integer value, found %s",
                       ir_dtype_name(v->dtype));
    s = sym_let(p, name, v, loc);
  } else if (accept_kw(p, "let")) {
    s = ir_stmt_new(m, RX_STMT_LET, loc);
    rx_loc nloc = cur(p)->loc;
    const char *name = ir_parse_def_name(p, "the name of the local");
    rx_local *l = ir_module_alloc(m, sizeof *l);
    l->name = name;
    l->loc = nloc;
    bool typed = accept(p, RX_TOK_COLON);
    if (typed) l->dtype = ir_parse_dtype(p, false);
    ir_parse_expect(p, RX_TOK_ASSIGN, "'=' and the value of the local");
    s->value = tx(p);
    if (!typed) l->dtype = s->value->dtype;
    s->local = l;
    define_tname(p, name, l, NULL, nloc);
  } else if (accept_kw(p, "alloc")) {
    s = ir_stmt_new(m, RX_STMT_ALLOC, loc);
    rx_loc nloc = cur(p)->loc;
    const char *name = ir_parse_def_name(p, "the name of the allocation");
    ir_parse_expect(p, RX_TOK_COLON, "':' and the type of the allocation");
    rx_scope scope = RX_SCOPE_GLOBAL;
    s->buf = buffer_decl(p, name, nloc, scope);
    if (accept_kw(p, "shared")) {
      s->buf->scope = RX_SCOPE_SHARED;
      s->buf->reuse = accept_kw(p, "reuse");
    } else if (accept_kw(p, "local"))
      s->buf->scope = RX_SCOPE_LOCAL;
    else if (accept_kw(p, "fragment"))
      frag_use(p, s->buf);
    else
      accept_kw(p, "global");
    define_tname(p, name, NULL, s->buf, nloc);
  } else if (is_kw(p, "async_copy") && ahead(p, 1)->kind == RX_TOK_IDENT) {
    next(p); /* `async_copy dst[i...] = src[j...] [if cond]` (ir.h, RX_STMT_ASYNC_COPY) */
    s = ir_stmt_new(m, RX_STMT_ASYNC_COPY, loc);
    store_target(p, s, "async_copy");
    ir_parse_expect(p, RX_TOK_ASSIGN, "'=' and the source of async_copy");
    s->value = tx(p);
    if (accept_kw(p, "if")) s->cond = tx(p);
  } else if (is_kw(p, "async_commit") && ahead(p, 1)->kind != RX_TOK_LBRACKET) {
    next(p);
    s = ir_stmt_new(m, RX_STMT_ASYNC_COMMIT, loc);
  } else if (is_kw(p, "async_wait") && ahead(p, 1)->kind == RX_TOK_INT) {
    next(p);
    s = ir_stmt_new(m, RX_STMT_ASYNC_WAIT, loc);
    rx_loc nloc = cur(p)->loc;
    int64_t n = ir_parse_int_lit(p, "the number of groups async_wait leaves in flight");
    if (n > 64)
      ir_parse_fail_at(p, nloc, "async_wait leaves at most 64 groups in flight (got %lld)",
                       (long long)n);
    s->count = (int)n;
  } else if (is_kw(p, "ldmatrix") && ahead(p, 1)->kind == RX_TOK_IDENT) {
    next(p); /* `ldmatrix xN [trans] frag = buf[i...]` (ir.h, RX_STMT_LDMATRIX) */
    s = ldmatrix_stmt(p, loc);
  } else if (is_kw(p, "wgmma") && ahead(p, 1)->kind == RX_TOK_IDENT) {
    next(p); /* `wgmma m64nNk16 acc, a[i...], b[j...]` (ir.h, RX_STMT_WGMMA) */
    s = wgmma_stmt(p, loc);
  } else if (is_kw(p, "wgmma_fence") && ahead(p, 1)->kind != RX_TOK_LBRACKET) {
    next(p);
    s = ir_stmt_new(m, RX_STMT_WGMMA_FENCE, loc);
  } else if (is_kw(p, "wgmma_commit") && ahead(p, 1)->kind != RX_TOK_LBRACKET) {
    next(p);
    s = ir_stmt_new(m, RX_STMT_WGMMA_COMMIT, loc);
  } else if (is_kw(p, "wgmma_wait") && ahead(p, 1)->kind == RX_TOK_INT) {
    next(p);
    s = ir_stmt_new(m, RX_STMT_WGMMA_WAIT, loc);
    rx_loc nloc = cur(p)->loc;
    int64_t n = ir_parse_int_lit(p, "the number of groups wgmma_wait leaves pending");
    if (n > 7) /* wgmma.wait_group N: the PTX ISA allows 0..7 */
      ir_parse_fail_at(p, nloc, "wgmma_wait leaves at most 7 groups pending (got %lld)",
                       (long long)n);
    s->count = (int)n;
    if (accept(p, RX_TOK_COMMA)) s->buf = buf_operand(p, "the accumulator", "wgmma_wait");
  } else if (t->kind == RX_TOK_IDENT && ahead(p, 1)->kind == RX_TOK_LBRACKET &&
             !ir_parse_is_keyword(t)) {
    s = ir_stmt_new(m, RX_STMT_STORE, loc);
    store_target(p, s, "a store");
    ir_parse_expect(p, RX_TOK_ASSIGN, "'=' and the value to store");
    s->value = tx(p);
  } else {
    ir_parse_fail_expected(
        p, "a statement (for, reduce, if, let, alloc, barrier, mma, frag, async_copy, "
           "async_commit, async_wait, ldmatrix, wgmma, wgmma_fence, wgmma_commit, wgmma_wait or "
           "a store 'buf[i] = v')");
  }
  ir_parse_end_stmt(p, "a statement");
  leave(p);
  return s;
}

/* `{ STATEMENT... }` as a SEQ; lets and allocs are visible to the rest of the block only. */
static rx_stmt *tblock(P *p) {
  rx_tok *open = cur(p);
  ir_parse_expect(p, RX_TOK_LBRACE, "'{' to start a block");
  ir_parse_enter(p);
  int mark = p->tvis.n;
  rx_stmt *seq = ir_stmt_new(p->m, RX_STMT_SEQ, open->loc);
  AVEC(rx_stmt *) body = {0};
  while (!accept(p, RX_TOK_RBRACE)) {
    if (is(p, RX_TOK_EOF)) ir_parse_fail_at(p, open->loc, "unterminated block: expected '}'");
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
  ir_parse_expect(p, RX_TOK_LPAREN, "'(' to start the parameters");
  while (!accept(p, RX_TOK_RPAREN)) {
    rx_param *q = ir_module_alloc(p->m, sizeof *q);
    q->loc = cur(p)->loc;
    q->is_output = accept_kw(p, "out");
    rx_loc nloc = cur(p)->loc;
    const char *name = ir_parse_def_name(p, "a parameter name");
    ir_parse_expect(p, RX_TOK_COLON, "':' and the type of the parameter");
    if (ext && value_type_ahead(p)) {
      if (q->is_output)
        ir_parse_fail_at(p, q->loc,
                         "an 'out' parameter must be a buffer like f32[n] (an extern that "
                         "makes its result declares it with '-> STRUCT_INFO')");
      q->kind = RX_PARAM_VALUE;
      q->name = name;
      q->sinfo = ir_parse_sinfo(p);
    } else if (ahead(p, 1)->kind == RX_TOK_LBRACKET) {
      q->kind = RX_PARAM_BUFFER;
      q->buf = buffer_decl(p, name, nloc, RX_SCOPE_GLOBAL);
      define_tname(p, name, NULL, q->buf, nloc);
    } else {
      if (q->is_output)
        ir_parse_fail_at(p, q->loc, "an 'out' parameter must be a buffer like f32[n]");
      q->kind = RX_PARAM_SCALAR;
      q->dtype = ir_parse_dtype(p, false);
      q->var = sym_expr_var(p->m->ctx, name); /* a symbolic variable, not a buffer */
    }
    APUSH(p, &v, q);
    if (accept(p, RX_TOK_RPAREN)) break;
    ir_parse_expect(p, RX_TOK_COMMA, "',' or ')' after a parameter");
  }
  /* scalar parameter names must not repeat either */
  for (int a = 0; a < v.n; a++)
    for (int b = a + 1; b < v.n; b++) {
      const char *na = ir_param_name(v.d[a]), *nb = ir_param_name(v.d[b]);
      if (na == nb)
        ir_parse_fail_at(p, v.d[b]->loc, "duplicate name '%s': first defined at line %u, column %u",
                         na, v.d[a]->loc.line, v.d[a]->loc.col);
    }
  *out = v.d;
  return v.n;
}

void ir_parse_tensor_fn(P *p, rx_loc loc) {
  rx_tensor_fn *f = ir_module_alloc(p->m, sizeof *f);
  f->loc = loc;
  f->name = ir_parse_def_name(p, "the name of the tensor program");
  p->tvis.n = 0;
  f->nparams = tparams(p, &f->params, false);
  f->nfacts = ir_parse_facts(p, &f->facts, &f->fact_locs);
  f->body = tblock(p);
  rx_item it = {RX_ITEM_TENSOR, f};
  RX_VEC_PUSH(&p->m->items, it);
}

void ir_parse_extern_fn(P *p, rx_loc loc, bool impure) {
  rx_extern_fn *f = ir_module_alloc(p->m, sizeof *f);
  f->loc = loc;
  f->impure = impure;
  f->name = ir_parse_def_name(p, "the name of the extern function");
  p->tvis.n = 0;
  f->nparams = tparams(p, &f->params, true);
  if (accept(p, RX_TOK_ARROW)) {
    for (int i = 0; i < f->nparams; i++)
      if (f->params[i]->is_output)
        ir_parse_fail_at(
            p, f->params[i]->loc,
            "an extern with '-> STRUCT_INFO' returns its result and has no 'out' parameter");
    f->ret = ir_parse_sinfo(p);
  }
  rx_item it = {RX_ITEM_EXTERN, f};
  RX_VEC_PUSH(&p->m->items, it);
}
