/* The printer of the text format (docs/text-format.md). Its output parses back to the same
 * module, and printing that again gives the same text (the round trip). */
#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct W {
  rx_strbuf *o;
  rx_expr_ctx *ctx;
  const ir_op_registry *ops; /* the module's: the names of its ops */
  int ind;                   /* indentation level, 2 spaces each */
} W;

static void indent(W *w) {
  for (int i = 0; i < w->ind; i++) base_strbuf_append(w->o, "  ");
}

/* Shortest "%.Ng" that reads back to the same double; always with '.', 'e', or inf/nan. */
static void put_double(rx_strbuf *o, double v) {
  if (isnan(v)) {
    base_strbuf_append(o, "nan");
    return;
  }
  if (isinf(v)) {
    base_strbuf_append(o, v < 0 ? "-inf" : "inf");
    return;
  }
  char buf[64];
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  base_strbuf_append(o, buf);
  if (!strpbrk(buf, ".e")) base_strbuf_append(o, ".0");
}

static void put_string(rx_strbuf *o, const char *s) {
  base_strbuf_putc(o, '"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') base_strbuf_putc(o, '\\');
    base_strbuf_putc(o, *s);
  }
  base_strbuf_putc(o, '"');
}

static void put_exprs(rx_strbuf *o, const rx_expr *const *e, int n) {
  for (int i = 0; i < n; i++) {
    if (i) base_strbuf_append(o, ", ");
    sym_expr_print(o, e[i]);
  }
}

/* ---- tensor-program expressions ---- */

static int sym_prec(const rx_expr *e) {
  return e->kind == RX_EXPR_CONST && e->value < 0 ? RX_PREC_UNARY : sym_expr_kind_prec(e->kind);
}

static int tx_prec(const rx_tx *e) {
  switch (e->kind) {
  case RX_TX_INT:
    return e->ival < 0 && e->dtype != RX_DTYPE_BOOL && e->weak ? RX_PREC_UNARY : RX_PREC_ATOM;
  case RX_TX_FLOAT:
    return e->weak && (e->fval < 0 || signbit(e->fval)) ? RX_PREC_UNARY : RX_PREC_ATOM;
  case RX_TX_SYM:
    return sym_prec(e->sym);
  case RX_TX_BINARY:
    return ir_binop_precedence(e->binop);
  case RX_TX_NEG:
    return RX_PREC_UNARY;
  case RX_TX_NOT:
    return RX_PREC_NOT;
  default:
    return RX_PREC_ATOM;
  }
}

static void ptx(rx_strbuf *o, const rx_tx *e, int min_prec) {
  bool paren = tx_prec(e) < min_prec;
  if (paren) base_strbuf_putc(o, '(');
  switch (e->kind) {
  case RX_TX_INT:
    if (e->dtype == RX_DTYPE_BOOL)
      base_strbuf_append(o, e->ival ? "true" : "false");
    else if (e->weak)
      base_strbuf_printf(o, "%lld", (long long)e->ival);
    else
      base_strbuf_printf(o, "%s(%lld)", ir_dtype_name(e->dtype), (long long)e->ival);
    break;
  case RX_TX_FLOAT:
    if (!e->weak) base_strbuf_printf(o, "%s(", ir_dtype_name(e->dtype));
    put_double(o, e->fval);
    if (!e->weak) base_strbuf_putc(o, ')');
    break;
  case RX_TX_SYM:
    sym_expr_print(o, e->sym);
    break;
  case RX_TX_LOCAL:
    base_strbuf_append(o, e->local->name);
    break;
  case RX_TX_LOAD:
    base_strbuf_printf(o, "%s[", e->buf->name);
    for (int i = 0; i < e->nidx; i++) {
      if (i) base_strbuf_append(o, ", ");
      ptx(o, e->idx[i], 0);
    }
    base_strbuf_putc(o, ']');
    break;
  case RX_TX_BINARY: {
    int p = ir_binop_precedence(e->binop);
    bool cmp = e->binop >= RX_BINOP_EQ && e->binop <= RX_BINOP_GE;
    ptx(o, e->a, cmp ? p + 1 : p);
    base_strbuf_printf(o, " %s ", ir_binop_name(e->binop));
    ptx(o, e->b, p + 1);
    break;
  }
  case RX_TX_NEG:
    base_strbuf_putc(o, '-');
    ptx(o, e->a, RX_PREC_UNARY + 1);
    break;
  case RX_TX_NOT:
    base_strbuf_putc(o, '!');
    ptx(o, e->a, 3);
    break;
  case RX_TX_SELECT:
    base_strbuf_append(o, "select(");
    ptx(o, e->a, 0);
    base_strbuf_append(o, ", ");
    ptx(o, e->b, 0);
    base_strbuf_append(o, ", ");
    ptx(o, e->c, 0);
    base_strbuf_putc(o, ')');
    break;
  case RX_TX_CAST:
    base_strbuf_printf(o, "%s(", ir_dtype_name(e->dtype));
    ptx(o, e->a, 0);
    base_strbuf_putc(o, ')');
    break;
  case RX_TX_CALL: {
    base_strbuf_printf(o, "%s(", ir_intrinsic_name(e->intrin));
    const rx_tx *args[3] = {e->a, e->b, e->c};
    int n = ir_intrinsic_arity(e->intrin);
    for (int i = 0; i < n && i < 3 && args[i]; i++) {
      if (i) base_strbuf_append(o, ", ");
      ptx(o, args[i], 0);
    }
    if (e->intrin == RX_INTRIN_CHECK) {
      base_strbuf_append(o, ", ");
      put_string(o, e->msg ? e->msg : "");
    }
    base_strbuf_putc(o, ')');
    break;
  }
  case RX_TX_HAS_FRAG:
    if (e->test == RX_TEST_ASYNC_COPY) {
      base_strbuf_printf(o, "%s()", ir_target_test_name(e->test));
      break;
    }
    base_strbuf_printf(o, "%s(%s, %s, %d, %d, %d)", ir_target_test_name(e->test),
                       ir_dtype_name(e->frag_ab), ir_dtype_name(e->frag_acc), e->frag_m, e->frag_n,
                       e->frag_k);
    break;
  }
  if (paren) base_strbuf_putc(o, ')');
}

void ir_tx_print(rx_strbuf *out, const rx_tx *e) { ptx(out, e, 0); }

/* ---- tensor-program statements ---- */

static void pstmt(W *w, const rx_stmt *s);

/* A condition; one folded to a constant prints as true or false. */
static void pcond(rx_strbuf *o, const rx_tx *c) {
  if (c->kind == RX_TX_SYM && c->sym->kind == RX_EXPR_CONST)
    base_strbuf_append(o, c->sym->value ? "true" : "false");
  else
    ptx(o, c, 0);
}

/* ` {`, the statements of s (a SEQ's children, or s itself) one level deeper, `}` */
static void pblock(W *w, const rx_stmt *s) {
  base_strbuf_append(w->o, " {\n");
  w->ind++;
  if (s) pstmt(w, s);
  w->ind--;
  indent(w);
  base_strbuf_putc(w->o, '}');
}

static void prange(W *w, const rx_stmt *s, int i) {
  base_strbuf_printf(w->o, "%s in ", s->vars[i]->kind == RX_EXPR_VAR ? s->vars[i]->name : "?");
  sym_expr_print(w->o, s->lo[i]);
  base_strbuf_append(w->o, "..");
  sym_expr_print(w->o, sym_expr_add(w->ctx, s->lo[i], s->extent[i]));
}

static void pbuffer(W *w, const rx_buffer *b) {
  base_strbuf_printf(w->o, "%s: %s[", b->name, ir_dtype_name(b->dtype));
  put_exprs(w->o, b->shape, b->ndim);
  base_strbuf_putc(w->o, ']');
}

/* `frag OP ...` (ir.h, RX_STMT_FRAG) */
/* `[i]`: the row of operand k of mma or ldmatrix in the indexed form (ir.h), else nothing. */
static void frag_row(rx_strbuf *o, const rx_stmt *s, int k) {
  if (k >= s->nidx || !s->idx[k]) return;
  base_strbuf_putc(o, '[');
  ptx(o, s->idx[k], 0);
  base_strbuf_putc(o, ']');
}

static void pfrag(W *w, const rx_stmt *s) {
  rx_strbuf *o = w->o;
  base_strbuf_printf(o, "frag %s %s, ", ir_frag_op_name(s->frag_op), s->buf ? s->buf->name : "?");
  switch (s->frag_op) {
  case RX_FRAG_OP_FILL:
    ptx(o, s->value, 0);
    break;
  case RX_FRAG_OP_MMA:
    base_strbuf_printf(o, "%s, %s, %s", s->mma_a ? s->mma_a->name : "?",
                       s->mma_b ? s->mma_b->name : "?", s->mma_c ? s->mma_c->name : "?");
    break;
  case RX_FRAG_OP_LOAD:
  case RX_FRAG_OP_STORE:
    base_strbuf_printf(o, "%s[", s->mem ? s->mem->name : "?");
    for (int i = 0; i < s->nidx; i++) {
      if (i) base_strbuf_append(o, ", ");
      ptx(o, s->idx[i], 0);
    }
    base_strbuf_append(o, "], ");
    ptx(o, s->value, 0);
    if (s->col_major) base_strbuf_append(o, ", col_major");
    break;
  case RX_FRAG_OP_COUNT:
    break;
  }
}

static void pstmt(W *w, const rx_stmt *s) {
  rx_strbuf *o = w->o;
  if (s->kind == RX_STMT_SEQ) {
    for (int i = 0; i < s->n; i++) pstmt(w, s->body[i]);
    return;
  }
  indent(w);
  switch (s->kind) {
  case RX_STMT_SEQ:
    break;
  case RX_STMT_FOR:
    base_strbuf_append(o, "for ");
    for (int i = 0; i < s->nvars; i++) {
      if (i) base_strbuf_append(o, ", ");
      prange(w, s, i);
    }
    if (rx_loop_is_bound(s->loop_kind) && s->count > 0)
      base_strbuf_printf(o, " bind(%s, blocks=%d)", ir_loop_kind_name(s->loop_kind), s->count);
    else if (rx_loop_is_bound(s->loop_kind))
      base_strbuf_printf(o, " bind(%s)", ir_loop_kind_name(s->loop_kind));
    else if (s->loop_kind != RX_LOOP_SERIAL)
      base_strbuf_printf(o, " %s", ir_loop_kind_name(s->loop_kind));
    pblock(w, s->inner);
    break;
  case RX_STMT_REDUCE:
    base_strbuf_append(o, "reduce ");
    for (int i = 0; i < s->nvars; i++) {
      if (i) base_strbuf_append(o, ", ");
      prange(w, s, i);
    }
    base_strbuf_append(o, " {\n");
    w->ind++;
    indent(w);
    base_strbuf_append(o, "init");
    pblock(w, s->init);
    base_strbuf_putc(o, '\n');
    indent(w);
    base_strbuf_append(o, "update");
    pblock(w, s->inner);
    base_strbuf_putc(o, '\n');
    w->ind--;
    indent(w);
    base_strbuf_putc(o, '}');
    break;
  case RX_STMT_ASYNC_COPY:
  case RX_STMT_STORE:
    base_strbuf_printf(o, "%s%s[", s->kind == RX_STMT_ASYNC_COPY ? "async_copy " : "",
                       s->buf->name);
    for (int i = 0; i < s->nidx; i++) {
      if (i) base_strbuf_append(o, ", ");
      ptx(o, s->idx[i], 0);
    }
    base_strbuf_append(o, "] = ");
    ptx(o, s->value, 0);
    if (s->cond) {
      base_strbuf_append(o, " if ");
      pcond(o, s->cond);
    }
    break;
  case RX_STMT_LET:
    if (s->local->sym)
      base_strbuf_printf(o, "let sym %s = ", s->local->name);
    else
      base_strbuf_printf(o, "let %s: %s = ", s->local->name, ir_dtype_name(s->local->dtype));
    ptx(o, s->value, 0);
    break;
  case RX_STMT_ALLOC:
    base_strbuf_append(o, "alloc ");
    pbuffer(w, s->buf);
    if (s->buf->frag)
      base_strbuf_printf(o, " fragment %s", ir_frag_use_name(s->buf->frag));
    else
      base_strbuf_printf(o, " %s%s", ir_scope_name(s->buf->scope), s->buf->reuse ? " reuse" : "");
    break;
  case RX_STMT_IF:
    base_strbuf_append(o, "if ");
    pcond(o, s->value);
    pblock(w, s->inner);
    if (s->otherwise) {
      base_strbuf_append(o, " else");
      pblock(w, s->otherwise);
    }
    break;
  case RX_STMT_BARRIER:
    base_strbuf_append(o, "barrier");
    break;
  case RX_STMT_MMA: {
    const rx_buffer *ops[3] = {s->buf, s->mma_a, s->mma_b};
    base_strbuf_append(o, "mma m16n8k16 ");
    for (int i = 0; i < 3; i++) {
      base_strbuf_printf(o, "%s%s", i ? ", " : "", ops[i] ? ops[i]->name : "?");
      frag_row(o, s, i);
    }
    break;
  }
  case RX_STMT_ASYNC_COMMIT:
    base_strbuf_append(o, "async_commit");
    break;
  case RX_STMT_ASYNC_WAIT:
    base_strbuf_printf(o, "async_wait %d", s->count);
    break;
  case RX_STMT_LDMATRIX:
    base_strbuf_printf(o, "ldmatrix x%d%s %s", s->count, s->trans ? " trans" : "",
                       s->buf ? s->buf->name : "?");
    frag_row(o, s, 0);
    base_strbuf_append(o, " = ");
    ptx(o, s->value, 0);
    break;
  case RX_STMT_WGMMA:
    base_strbuf_printf(o, "wgmma m64n%dk16%s %s, ", s->count, s->trans ? " trans" : "",
                       s->buf ? s->buf->name : "?");
    ptx(o, s->value, 0);
    base_strbuf_append(o, ", ");
    ptx(o, s->wg_b, 0);
    break;
  case RX_STMT_WGMMA_FENCE:
    base_strbuf_append(o, "wgmma_fence");
    break;
  case RX_STMT_WGMMA_COMMIT:
    base_strbuf_append(o, "wgmma_commit");
    break;
  case RX_STMT_WGMMA_WAIT:
    base_strbuf_printf(o, "wgmma_wait %d", s->count);
    if (s->buf) base_strbuf_printf(o, ", %s", s->buf->name);
    break;
  case RX_STMT_FRAG:
    pfrag(w, s);
    break;
  }
  base_strbuf_putc(o, '\n');
}

static void pparams(W *w, rx_param *const *params, int n) {
  base_strbuf_putc(w->o, '(');
  for (int i = 0; i < n; i++) {
    const rx_param *q = params[i];
    if (i) base_strbuf_append(w->o, ", ");
    if (q->is_output) base_strbuf_append(w->o, "out ");
    if (q->kind == RX_PARAM_BUFFER) {
      pbuffer(w, q->buf);
    } else if (q->kind == RX_PARAM_VALUE) {
      base_strbuf_printf(w->o, "%s: ", q->name);
      ir_sinfo_print(w->o, q->sinfo);
    } else {
      if (q->var->kind == RX_EXPR_VAR)
        base_strbuf_append(w->o, q->var->name);
      else
        sym_expr_print(w->o, q->var);
      base_strbuf_printf(w->o, ": %s", ir_dtype_name(q->dtype));
    }
  }
  base_strbuf_putc(w->o, ')');
}

static void pfacts(W *w, const rx_expr *const *facts, int n) {
  if (!n) return;
  base_strbuf_append(w->o, " where ");
  put_exprs(w->o, facts, n);
}

/* ---- graph functions ---- */

static void pnode(W *w, const rx_node *n);

static void pargs(W *w, rx_node *const *args, int n, bool first) {
  for (int i = 0; i < n; i++) {
    if (i || !first) base_strbuf_append(w->o, ", ");
    pnode(w, args[i]);
  }
}

static void pattr(W *w, const rx_attr *a) {
  rx_strbuf *o = w->o;
  base_strbuf_printf(o, "%s=", a->name);
  switch (a->kind) {
  case RX_ATTR_INT:
    base_strbuf_printf(o, "%lld", (long long)a->i);
    break;
  case RX_ATTR_FLOAT:
    put_double(o, a->f);
    break;
  case RX_ATTR_BOOL:
    base_strbuf_append(o, a->i ? "true" : "false");
    break;
  case RX_ATTR_STR:
    put_string(o, a->s ? a->s : "");
    break;
  case RX_ATTR_DTYPE:
    base_strbuf_append(o, ir_dtype_name(a->dtype));
    break;
  case RX_ATTR_INTS:
    base_strbuf_putc(o, '[');
    for (int i = 0; i < a->n; i++)
      base_strbuf_printf(o, "%s%lld", i ? ", " : "", (long long)a->ints[i]);
    base_strbuf_putc(o, ']');
    break;
  case RX_ATTR_EXPRS:
    base_strbuf_putc(o, '[');
    put_exprs(o, a->exprs, a->n);
    base_strbuf_putc(o, ']');
    break;
  }
}

static void pconst_value(W *w, rx_dtype dt, double v) {
  if (!ir_dtype_is_float(dt) && v == floor(v) && fabs(v) < 9.0e18)
    base_strbuf_printf(w->o, "%lld", (long long)v);
  else
    put_double(w->o, v);
}

/* Element i of constant n: an exact integer where it has one (past 2^53 a double rounds). */
static void pconst_elem(W *w, const rx_node *n, rx_dtype dt, size_t i) {
  if (n->idata)
    base_strbuf_printf(w->o, "%lld", (long long)n->idata[i]);
  else
    pconst_value(w, dt, n->data[i]);
}

static void pseq_body(W *w, const rx_seq *s);

static void pnode(W *w, const rx_node *n) {
  rx_strbuf *o = w->o;
  switch (n->kind) {
  case RX_NODE_VAR:
    base_strbuf_append(o, n->var->name);
    return;
  case RX_NODE_PRIM:
    if (ir_dtype_is_float(n->prim_dtype)) {
      if (!n->weak) base_strbuf_printf(o, "prim(%s, ", ir_dtype_name(n->prim_dtype));
      put_double(o, n->fvalue);
      if (!n->weak) base_strbuf_putc(o, ')');
      return;
    }
    if (n->weak && n->prim && n->prim->kind == RX_EXPR_CONST) {
      if (n->prim_dtype == RX_DTYPE_BOOL)
        base_strbuf_append(o, n->prim->value ? "true" : "false");
      else
        base_strbuf_printf(o, "%lld", (long long)n->prim->value);
      return;
    }
    base_strbuf_append(o, "prim(");
    if (n->prim_dtype != RX_DTYPE_I64) base_strbuf_printf(o, "%s, ", ir_dtype_name(n->prim_dtype));
    if (n->prim)
      sym_expr_print(o, n->prim);
    else
      base_strbuf_putc(o, '0');
    base_strbuf_putc(o, ')');
    return;
  case RX_NODE_SHAPE:
    base_strbuf_putc(o, '[');
    put_exprs(o, n->dims, n->ndims);
    base_strbuf_putc(o, ']');
    return;
  case RX_NODE_TUPLE:
    base_strbuf_putc(o, '(');
    pargs(w, n->args, n->nargs, true);
    if (n->nargs == 1) base_strbuf_putc(o, ',');
    base_strbuf_putc(o, ')');
    return;
  case RX_NODE_GET_ITEM:
    pnode(w, n->args[0]);
    base_strbuf_printf(o, ".%d", n->index);
    return;
  case RX_NODE_CALL:
    /* a module without a registry has no op calls (its parser refuses them): "?" if one does */
    base_strbuf_printf(o, "%s(", w->ops ? w->ops->name(n->op) : "?");
    pargs(w, n->args, n->nargs, true);
    for (int i = 0; i < n->nattrs; i++) {
      if (i || n->nargs) base_strbuf_append(o, ", ");
      pattr(w, &n->attrs[i]);
    }
    base_strbuf_putc(o, ')');
    return;
  case RX_NODE_CALL_TENSOR:
  case RX_NODE_CALL_EXTERN: {
    bool tensor = n->kind == RX_NODE_CALL_TENSOR;
    const char *callee =
        tensor ? (n->tfn ? n->tfn->name : n->callee) : (n->ext ? n->ext->name : n->callee);
    base_strbuf_printf(o, "%s(%s", tensor ? "call_tensor" : "call_extern", callee);
    pargs(w, n->args, n->nargs, false);
    if (n->inplace) {
      base_strbuf_append(o, ", inplace=");
      pnode(w, n->inplace);
      if (n->fresh_out) {
        base_strbuf_append(o, ", out=");
        ir_sinfo_print(o, n->fresh_out);
      }
    } else {
      base_strbuf_append(o, ", out=");
      ir_sinfo_print(o, n->out);
    }
    if (n->nextra) {
      base_strbuf_append(o, ", dims=[");
      put_exprs(o, n->extra_dims, n->nextra);
      base_strbuf_putc(o, ']');
    }
    base_strbuf_putc(o, ')');
    return;
  }
  case RX_NODE_CALL_GRAPH:
    base_strbuf_printf(o, "%s(", n->gfn ? n->gfn->name : n->callee);
    pargs(w, n->args, n->nargs, true);
    base_strbuf_putc(o, ')');
    return;
  case RX_NODE_IF:
    base_strbuf_append(o, "if ");
    pnode(w, n->cond);
    base_strbuf_append(o, " {\n");
    w->ind++;
    pseq_body(w, n->then_seq);
    w->ind--;
    indent(w);
    base_strbuf_append(o, "} else {\n");
    w->ind++;
    pseq_body(w, n->else_seq);
    w->ind--;
    indent(w);
    base_strbuf_putc(o, '}');
    return;
  case RX_NODE_CONST: {
    const rx_sinfo *s = n->sinfo;
    rx_dtype dt = s ? s->dtype : RX_DTYPE_F32;
    base_strbuf_append(o, "const(");
    ir_sinfo_print(o, s);
    base_strbuf_append(o, ", ");
    bool scalar = s && s->kind == RX_SINFO_TENSOR && s->ndim == 0 && n->count == 1;
    if (scalar) {
      pconst_elem(w, n, dt, 0);
    } else {
      base_strbuf_putc(o, '[');
      for (size_t i = 0; i < n->count; i++) {
        if (i) base_strbuf_append(o, ", ");
        pconst_elem(w, n, dt, i);
      }
      base_strbuf_putc(o, ']');
    }
    base_strbuf_putc(o, ')');
    return;
  }
  }
}

static void pbinding(W *w, const rx_binding *b) {
  rx_strbuf *o = w->o;
  indent(w);
  base_strbuf_append(o, b->var->name);
  if (b->var->sinfo) {
    base_strbuf_append(o, ": ");
    ir_sinfo_print(o, b->var->sinfo);
  }
  base_strbuf_append(o, " = ");
  if (b->cast) {
    base_strbuf_append(o, "match_cast(");
    pnode(w, b->value);
    base_strbuf_append(o, ", ");
    ir_sinfo_print(o, b->cast);
    base_strbuf_putc(o, ')');
  } else {
    pnode(w, b->value);
  }
  base_strbuf_putc(o, '\n');
}

static void pblocks(W *w, const rx_seq *s) {
  for (int i = 0; i < s->nblocks; i++) {
    const rx_block *b = s->blocks[i];
    if (b->dataflow) {
      indent(w);
      base_strbuf_append(w->o, "dataflow {\n");
      w->ind++;
    }
    for (int j = 0; j < b->nbindings; j++) pbinding(w, b->bindings[j]);
    if (b->dataflow) {
      w->ind--;
      indent(w);
      base_strbuf_append(w->o, "}\n");
    }
  }
}

/* An if branch: its bindings, then its value. */
static void pseq_body(W *w, const rx_seq *s) {
  pblocks(w, s);
  indent(w);
  if (s->result)
    pnode(w, s->result);
  else
    base_strbuf_append(w->o, "()");
  base_strbuf_putc(w->o, '\n');
}

static void pgraph(W *w, const rx_graph_fn *f) {
  rx_strbuf *o = w->o;
  base_strbuf_printf(o, "graph_fn %s(", f->name);
  for (int i = 0; i < f->nparams; i++) {
    if (i) base_strbuf_append(o, ", ");
    base_strbuf_printf(o, "%s: ", f->params[i]->name);
    ir_sinfo_print(o, f->params[i]->sinfo);
  }
  base_strbuf_putc(o, ')');
  if (f->ret) {
    base_strbuf_append(o, " -> ");
    ir_sinfo_print(o, f->ret);
  }
  pfacts(w, f->facts, f->nfacts);
  base_strbuf_append(o, " {\n");
  w->ind = 1;
  pblocks(w, &f->body);
  indent(w);
  base_strbuf_append(o, "return ");
  if (f->body.result)
    pnode(w, f->body.result);
  else
    base_strbuf_append(o, "()");
  base_strbuf_append(o, "\n}\n");
  w->ind = 0;
}

void ir_module_print(rx_strbuf *out, const rx_module *m) {
  W w = {.o = out, .ctx = m->ctx, .ops = m->ops};
  for (size_t i = 0; i < m->meshes.len; i++) {
    const rx_mesh *me = &m->meshes.data[i];
    base_strbuf_printf(out, "mesh %s = [", me->name);
    for (int k = 0; k < me->ndim; k++)
      base_strbuf_printf(out, "%s%lld", k ? ", " : "", (long long)me->shape[k]);
    base_strbuf_append(out, "]\n");
  }
  for (size_t i = 0; i < m->items.len; i++) {
    const rx_item *it = &m->items.data[i];
    if (i || m->meshes.len) base_strbuf_putc(out, '\n');
    switch (it->kind) {
    case RX_ITEM_GRAPH:
      pgraph(&w, it->fn);
      break;
    case RX_ITEM_TENSOR: {
      const rx_tensor_fn *f = it->fn;
      base_strbuf_printf(out, "tensor_fn %s", f->name);
      pparams(&w, f->params, f->nparams);
      pfacts(&w, f->facts, f->nfacts);
      w.ind = 0;
      pblock(&w, f->body);
      base_strbuf_putc(out, '\n');
      break;
    }
    case RX_ITEM_EXTERN: {
      const rx_extern_fn *f = it->fn;
      base_strbuf_printf(out, "%sextern_fn %s", f->impure ? "impure " : "", f->name);
      pparams(&w, f->params, f->nparams);
      if (f->ret) {
        base_strbuf_append(out, " -> ");
        ir_sinfo_print(out, f->ret);
      }
      base_strbuf_putc(out, '\n');
      break;
    }
    }
  }
}
