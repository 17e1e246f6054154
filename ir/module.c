/* The module, its tables (dtypes, loop kinds, intrinsics, operators) and node constructors. */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

/* ---- dtypes ---- */

static const struct {
  const char *name;
  int bits;
  bool is_float, is_signed;
} dtypes[] = {[RX_DTYPE_UNKNOWN] = {"any", 0, false, false},
#define X(e, n, b, f, s) [RX_DTYPE_##e] = {n, b, f, s},
              RX_DTYPES(X)
#undef X
};

const char *ir_dtype_name(rx_dtype t) {
  return (unsigned)t < RX_DTYPE_COUNT ? dtypes[t].name : "?";
}
int ir_dtype_bits(rx_dtype t) { return (unsigned)t < RX_DTYPE_COUNT ? dtypes[t].bits : 0; }
bool ir_dtype_is_float(rx_dtype t) { return (unsigned)t < RX_DTYPE_COUNT && dtypes[t].is_float; }
bool ir_dtype_is_signed(rx_dtype t) { return (unsigned)t < RX_DTYPE_COUNT && dtypes[t].is_signed; }
bool ir_dtype_is_int(rx_dtype t) {
  return t != RX_DTYPE_UNKNOWN && t != RX_DTYPE_BOOL && (unsigned)t < RX_DTYPE_COUNT &&
         !dtypes[t].is_float;
}

bool ir_dtype_parse(const char *s, size_t n, rx_dtype *out) {
  for (int t = 0; t < RX_DTYPE_COUNT; t++) {
    if (strlen(dtypes[t].name) == n && memcmp(dtypes[t].name, s, n) == 0) {
      *out = (rx_dtype)t;
      return true;
    }
  }
  return false;
}

/* ---- loop nests ---- */

const rx_stmt *ir_stmt_unwrap(const rx_stmt *s) {
  while (s && s->kind == RX_STMT_SEQ && s->n == 1) s = s->body[0];
  return s;
}

int ir_stmt_peel_serial(const rx_stmt *s, int max, const rx_stmt **loops,
                        const rx_stmt **out_inner) {
  int n = 0;
  s = ir_stmt_unwrap(s);
  *out_inner = s;
  while (s && s->kind == RX_STMT_FOR && s->loop_kind == RX_LOOP_SERIAL && n < max) {
    loops[n++] = s;
    *out_inner = s->inner;
    s = ir_stmt_unwrap(s->inner);
  }
  return n;
}

/* ---- loop kinds, fusion patterns, scopes, intrinsics, binary operators ---- */

static const char *loop_kinds[] = {
#define X(e, n) n,
    RX_LOOP_KINDS(X)
#undef X
};
const char *ir_loop_kind_name(rx_loop_kind k) {
  return (unsigned)k < RX_LOOP_KIND_COUNT ? loop_kinds[k] : "?";
}

static const char *const pattern_names[] = {
#define X(e, n) n,
    RX_PATTERNS(X)
#undef X
};
const char *ir_pattern_name(rx_pattern p) {
  return (unsigned)p < RX_PATTERN_COUNT ? pattern_names[p] : "?";
}

static const char *const frag_use_names[] = {
#define X(e, n) n,
    RX_FRAG_USES(X)
#undef X
};
const char *ir_frag_use_name(rx_frag_use u) {
  return (unsigned)u < RX_FRAG_USE_COUNT ? frag_use_names[u] : "?";
}
static const char *const frag_op_names[] = {
#define X(e, n) n,
    RX_FRAG_OPS(X)
#undef X
};
const char *ir_frag_op_name(rx_frag_op op) {
  return (unsigned)op < RX_FRAG_OP_COUNT ? frag_op_names[op] : "?";
}

static const char *const target_test_names[] = {
#define X(e, n) n,
    RX_TARGET_TESTS(X)
#undef X
};
const char *ir_target_test_name(rx_target_test t) {
  return (unsigned)t < RX_TEST_COUNT ? target_test_names[t] : "?";
}

const char *ir_scope_name(rx_scope s) {
  switch (s) {
  case RX_SCOPE_GLOBAL:
    return "global";
  case RX_SCOPE_SHARED:
    return "shared";
  case RX_SCOPE_LOCAL:
    return "local";
  }
  return "?";
}

static const struct {
  const char *name;
  int arity;
  char kind;
} intrinsics[] = {
#define X(e, n, a, k) {n, a, k},
    RX_INTRINSICS(X)
#undef X
};
const char *ir_intrinsic_name(rx_intrinsic i) { return intrinsics[i].name; }
int ir_intrinsic_arity(rx_intrinsic i) { return intrinsics[i].arity; }
char ir_intrinsic_kind(rx_intrinsic i) { return intrinsics[i].kind; }
bool ir_intrinsic_lookup(const char *s, size_t n, rx_intrinsic *out) {
  for (int i = 0; i < RX_INTRIN_COUNT; i++) {
    if (strlen(intrinsics[i].name) == n && memcmp(intrinsics[i].name, s, n) == 0) {
      *out = (rx_intrinsic)i;
      return true;
    }
  }
  return false;
}

static const struct {
  const char *name;
  int prec;
} binops[] = {
#define X(e, n, p) {n, p},
    RX_BINOPS(X)
#undef X
};
const char *ir_binop_name(rx_binop op) { return binops[op].name; }
int ir_binop_precedence(rx_binop op) { return binops[op].prec; }

/* ---- module ---- */

rx_module *ir_module_new(const ir_op_registry *ops) {
  rx_module *m = base_calloc(1, sizeof *m);
  base_arena_init(&m->arena);
  m->ctx = sym_expr_ctx_new();
  m->ops = ops;
  return m;
}

void rx_module_free(rx_module *m) {
  if (!m) return;
  ir_module_weights_free(m); /* first: a callback may read the module's weights */
  free(m->items.data);
  ir_module_items_changed(m);
  free(m->sources.data);
  free(m->sections.data);
  free(m->meshes.data);
  sym_expr_ctx_free(m->ctx);
  base_arena_free(&m->arena);
  free(m);
}

const char *ir_module_intern(rx_module *m, const char *s, size_t n) {
  return sym_expr_ctx_intern(m->ctx, s, n);
}
void *ir_module_alloc(rx_module *m, size_t n) { return base_arena_alloc(&m->arena, n); }

static const char *item_name_of(const rx_item *it) {
  return it->kind == RX_ITEM_GRAPH    ? ((rx_graph_fn *)it->fn)->name
         : it->kind == RX_ITEM_TENSOR ? ((rx_tensor_fn *)it->fn)->name
                                      : ((rx_extern_fn *)it->fn)->name;
}

void ir_module_items_changed(rx_module *m) {
  for (int k = 0; k < 3; k++) base_ptrmap_free(&m->item_index[k]);
  memset(m->item_index, 0, sizeof m->item_index);
  m->item_indexed = 0;
  m->item_last = NULL;
}

/* Brings the index up to date with the items appended since it was last used (all of them when
 * the list shrank or its last indexed item changed: a pass removed or reordered items). The first
 * item of a name wins, as a scan in order would find it. */
static void index_items(rx_module *m) {
  if (m->item_indexed > m->items.len ||
      (m->item_indexed && m->items.data[m->item_indexed - 1].fn != m->item_last))
    ir_module_items_changed(m);
  for (size_t i = m->item_indexed; i < m->items.len; i++) {
    const rx_item *it = &m->items.data[i];
    const char *n = item_name_of(it);
    const char *key = ir_module_intern(m, n, strlen(n));
    if (base_ptrmap_get(&m->item_index[it->kind], key) < 0)
      base_ptrmap_put(&m->item_index[it->kind], key, (int)i);
  }
  m->item_indexed = m->items.len;
  m->item_last = m->items.len ? m->items.data[m->items.len - 1].fn : NULL;
}

static void *find_item(rx_module *m, rx_item_kind kind, const char *name) {
  index_items(m);
  const char *key = ir_module_intern(m, name, strlen(name));
  int i = base_ptrmap_get(&m->item_index[kind], key);
  if (i < 0) return NULL;
  rx_item *it = &m->items.data[i];
  if (it->kind == kind && strcmp(item_name_of(it), name) == 0) return it->fn;
  /* a stale entry (an item renamed or moved without ir_module_items_changed): rebuild */
  ir_module_items_changed(m);
  index_items(m);
  i = base_ptrmap_get(&m->item_index[kind], key);
  return i < 0 ? NULL : m->items.data[i].fn;
}
rx_graph_fn *ir_module_graph_fn(rx_module *m, const char *name) {
  return find_item(m, RX_ITEM_GRAPH, name);
}
rx_tensor_fn *ir_module_tensor_fn(rx_module *m, const char *name) {
  return find_item(m, RX_ITEM_TENSOR, name);
}
rx_extern_fn *ir_module_extern_fn(rx_module *m, const char *name) {
  return find_item(m, RX_ITEM_EXTERN, name);
}

const rx_mesh *ir_module_mesh(const rx_module *m, const char *name) {
  for (size_t i = 0; i < m->meshes.len; i++)
    if (m->meshes.data[i].name == name) return &m->meshes.data[i];
  return NULL;
}

/* ---- graph nodes ---- */

rx_node *ir_node_new(rx_module *m, rx_node_kind kind, rx_loc loc) {
  rx_node *n = ir_module_alloc(m, sizeof *n);
  n->kind = kind;
  n->loc = loc;
  return n;
}

rx_node *ir_node_var(rx_module *m, rx_var *v, rx_loc loc) {
  rx_node *n = ir_node_new(m, RX_NODE_VAR, loc);
  n->var = v;
  return n;
}

rx_node *ir_node_int(rx_module *m, rx_dtype dtype, const rx_expr *value, rx_loc loc) {
  rx_node *n = ir_node_new(m, RX_NODE_PRIM, loc);
  n->prim_dtype = dtype;
  n->prim = value;
  return n;
}

rx_node *ir_node_float(rx_module *m, rx_dtype dtype, double v, rx_loc loc) {
  rx_node *n = ir_node_new(m, RX_NODE_PRIM, loc);
  n->prim_dtype = dtype;
  n->fvalue = v;
  return n;
}

rx_var *ir_var_new(rx_module *m, const char *name, const rx_sinfo *sinfo, rx_loc loc) {
  rx_var *v = ir_module_alloc(m, sizeof *v);
  v->name = ir_module_intern(m, name, strlen(name));
  v->sinfo = sinfo;
  v->loc = loc;
  return v;
}

const char *ir_param_name(const rx_param *p) {
  switch (p->kind) {
  case RX_PARAM_BUFFER:
    return p->buf->name;
  case RX_PARAM_SCALAR:
    return p->var->name;
  case RX_PARAM_VALUE:
    return p->name;
  }
  return "?";
}

int ir_inplace_targets(const rx_node *n) {
  if (!n->inplace) return 0;
  return n->inplace->kind == RX_NODE_TUPLE ? n->inplace->nargs : 1;
}

static void seq_uses(const rx_seq *s, rx_varvec *out) {
  if (!s) return;
  for (int b = 0; b < s->nblocks; b++)
    for (int i = 0; i < s->blocks[b]->nbindings; i++)
      ir_node_uses(s->blocks[b]->bindings[i]->value, out);
  ir_node_uses(s->result, out);
}

void ir_node_uses(const rx_node *n, rx_varvec *out) {
  if (!n) return;
  if (n->kind == RX_NODE_VAR) {
    RX_VEC_PUSH(out, n->var);
    return;
  }
  for (int i = 0; i < n->nargs; i++) ir_node_uses(n->args[i], out);
  ir_node_uses(n->inplace, out);
  if (n->kind == RX_NODE_IF) {
    ir_node_uses(n->cond, out);
    seq_uses(n->then_seq, out);
    seq_uses(n->else_seq, out);
  }
}

/* ---- tensor-program expressions ---- */

static rx_tx *tx_new(rx_module *m, rx_tx_kind kind, rx_dtype dtype, rx_loc loc) {
  rx_tx *e = ir_module_alloc(m, sizeof *e);
  e->kind = kind;
  e->dtype = dtype;
  e->loc = loc;
  return e;
}

rx_tx *ir_tx_int(rx_module *m, int64_t v, rx_dtype dtype, bool weak, rx_loc loc) {
  rx_tx *e = tx_new(m, RX_TX_INT, dtype, loc);
  e->ival = v;
  e->weak = weak;
  return e;
}

rx_tx *ir_tx_float(rx_module *m, double v, rx_dtype dtype, bool weak, rx_loc loc) {
  rx_tx *e = tx_new(m, RX_TX_FLOAT, dtype, loc);
  e->fval = v;
  e->weak = weak;
  return e;
}

rx_tx *ir_tx_sym(rx_module *m, const rx_expr *sym, rx_loc loc) {
  rx_tx *e = tx_new(m, RX_TX_SYM, sym_expr_is_bool(sym) ? RX_DTYPE_BOOL : RX_DTYPE_I64, loc);
  e->sym = sym;
  return e;
}

rx_tx *ir_tx_local(rx_module *m, rx_local *l, rx_loc loc) {
  rx_tx *e = tx_new(m, RX_TX_LOCAL, l->dtype, loc);
  e->local = l;
  return e;
}

rx_tx *ir_tx_load(rx_module *m, rx_buffer *b, rx_tx **idx, int n, rx_loc loc) {
  rx_tx *e = tx_new(m, RX_TX_LOAD, b->dtype, loc);
  e->buf = b;
  e->idx = base_arena_dup(&m->arena, idx, sizeof *idx * (size_t)n);
  e->nidx = n;
  return e;
}

/* The symbolic form of an integer/bool expression, or NULL when e is not one: a symbolic
 * node, or a weakly typed (i64) integer literal. */
static const rx_expr *as_sym(rx_module *m, const rx_tx *e) {
  if (e->kind == RX_TX_SYM) return e->sym;
  if (e->kind == RX_TX_INT && e->dtype == RX_DTYPE_I64) return sym_expr_const(m->ctx, e->ival);
  return NULL;
}

static const rx_expr_kind binop_expr_kind[RX_BINOP_COUNT] = {
    [RX_BINOP_ADD] = RX_EXPR_ADD,
    [RX_BINOP_SUB] = RX_EXPR_SUB,
    [RX_BINOP_MUL] = RX_EXPR_MUL,
    [RX_BINOP_DIV] = RX_EXPR_KIND_COUNT,
    [RX_BINOP_FLOORDIV] = RX_EXPR_FLOORDIV,
    [RX_BINOP_FLOORMOD] = RX_EXPR_FLOORMOD,
    [RX_BINOP_EQ] = RX_EXPR_EQ,
    [RX_BINOP_NE] = RX_EXPR_NE,
    [RX_BINOP_LT] = RX_EXPR_LT,
    [RX_BINOP_LE] = RX_EXPR_LE,
    [RX_BINOP_GT] = RX_EXPR_GT,
    [RX_BINOP_GE] = RX_EXPR_GE,
    [RX_BINOP_AND] = RX_EXPR_AND,
    [RX_BINOP_OR] = RX_EXPR_OR,
};

static bool is_cmp(rx_binop op) { return op >= RX_BINOP_EQ && op <= RX_BINOP_GE; }

rx_tx *ir_tx_binary(rx_module *m, rx_binop op, rx_tx *a, rx_tx *b, rx_loc loc) {
  const rx_expr *sa = as_sym(m, a), *sb = as_sym(m, b);
  rx_expr_kind k = binop_expr_kind[op];
  if (sa && sb && k != RX_EXPR_KIND_COUNT) {
    /* arithmetic and comparisons of integers, logic of booleans: one symbolic node */
    return ir_tx_sym(m, sym_expr_make(m->ctx, k, sa, sb, NULL), loc);
  }
  rx_dtype t;
  if (is_cmp(op) || op == RX_BINOP_AND || op == RX_BINOP_OR)
    t = RX_DTYPE_BOOL;
  else if (a->weak && !b->weak)
    t = b->dtype;
  else
    t = a->dtype;
  rx_tx *e = tx_new(m, RX_TX_BINARY, t, loc);
  e->binop = op;
  e->a = a;
  e->b = b;
  return e;
}

rx_tx *ir_tx_neg(rx_module *m, rx_tx *a, rx_loc loc) {
  const rx_expr *s = as_sym(m, a);
  if (s && !sym_expr_is_bool(s)) return ir_tx_sym(m, sym_expr_neg(m->ctx, s), loc);
  if (a->kind == RX_TX_FLOAT) return ir_tx_float(m, -a->fval, a->dtype, a->weak, loc);
  rx_tx *e = tx_new(m, RX_TX_NEG, a->dtype, loc);
  e->a = a;
  return e;
}

rx_tx *ir_tx_not(rx_module *m, rx_tx *a, rx_loc loc) {
  const rx_expr *s = as_sym(m, a);
  if (s) return ir_tx_sym(m, sym_expr_not(m->ctx, s), loc);
  rx_tx *e = tx_new(m, RX_TX_NOT, RX_DTYPE_BOOL, loc);
  e->a = a;
  return e;
}

rx_tx *ir_tx_select(rx_module *m, rx_tx *c, rx_tx *a, rx_tx *b, rx_loc loc) {
  const rx_expr *sc = as_sym(m, c), *sa = as_sym(m, a), *sb = as_sym(m, b);
  if (sc && sa && sb) return ir_tx_sym(m, sym_expr_select(m->ctx, sc, sa, sb), loc);
  rx_tx *e = tx_new(m, RX_TX_SELECT, a->weak && !b->weak ? b->dtype : a->dtype, loc);
  e->a = c;
  e->b = a;
  e->c = b;
  return e;
}

rx_tx *ir_tx_cast(rx_module *m, rx_dtype to, rx_tx *a, rx_loc loc) {
  rx_tx *e = tx_new(m, RX_TX_CAST, to, loc);
  e->a = a;
  return e;
}

rx_tx *ir_tx_call(rx_module *m, rx_intrinsic f, rx_tx **args, int n, rx_loc loc) {
  if ((f == RX_INTRIN_MIN || f == RX_INTRIN_MAX) && n == 2) {
    const rx_expr *sa = as_sym(m, args[0]), *sb = as_sym(m, args[1]);
    /* integers (a literal 0 or 1 included: max(i, 0) is an index), not booleans */
    bool ints = sa && sb && (sa->kind == RX_EXPR_CONST || !sym_expr_is_bool(sa)) &&
                (sb->kind == RX_EXPR_CONST || !sym_expr_is_bool(sb));
    if (ints)
      return ir_tx_sym(
          m, f == RX_INTRIN_MIN ? sym_expr_min(m->ctx, sa, sb) : sym_expr_max(m->ctx, sa, sb), loc);
  }
  rx_dtype t = n > 0 ? args[0]->dtype : RX_DTYPE_F32;
  for (int i = 0; i < n; i++)
    if (!args[i]->weak) {
      t = args[i]->dtype;
      break;
    }
  if (f == RX_INTRIN_CHECK && n == 2) t = args[1]->dtype;       /* check(ok, v): v */
  if (f == RX_INTRIN_SHUFFLE_XOR && n == 2) t = args[0]->dtype; /* shuffle_xor(x, mask): x */
  rx_tx *e = tx_new(m, RX_TX_CALL, t, loc);
  e->intrin = f;
  if (n > 0) e->a = args[0];
  if (n > 1) e->b = args[1];
  if (n > 2) e->c = args[2];
  return e;
}

rx_tx *ir_tx_has_frag(rx_module *m, rx_target_test test, rx_dtype ab, rx_dtype acc, int mm, int nn,
                      int kk, rx_loc loc) {
  rx_tx *e = tx_new(m, RX_TX_HAS_FRAG, RX_DTYPE_BOOL, loc);
  e->test = test;
  e->frag_ab = ab;
  e->frag_acc = acc;
  e->frag_m = mm;
  e->frag_n = nn;
  e->frag_k = kk;
  return e;
}

rx_stmt *ir_stmt_new(rx_module *m, rx_stmt_kind kind, rx_loc loc) {
  rx_stmt *s = ir_module_alloc(m, sizeof *s);
  s->kind = kind;
  s->loc = loc;
  return s;
}
