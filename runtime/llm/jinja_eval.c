/* runtime/llm/jinja_eval.c: the chat-template evaluator (runtime/llm/jinja.h) and the public
 * rx_chat_template_* functions of relaxc/llm.h.
 *
 * Semantics are jinja2's (3.1) in transformers' ImmutableSandboxedEnvironment: Python's
 * arithmetic, comparisons and truth; jinja2's default Undefined (prints as "", is false, iterates
 * as empty; its attribute is an error); a for loop's own scope (a `set` inside stays inside:
 * namespace() carries values out); macros see the template's top-level variables and their
 * arguments. Values live in the render's arena; every allocation counts against JJ_MAX_MEMORY. */
#include "jinja.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct jj_scope {
  jj_scope *parent;
  const char **names;
  jv **vals;
  size_t n, cap;
};

jv *jj_fail(jj_ctx *c, const char *fmt, ...) {
  if (c->failed) return NULL;
  c->failed = true;
  int k = snprintf(c->err, sizeof c->err, "%s:%d:%d: ", c->t->name, c->line, c->col);
  if (k < 0 || (size_t)k >= sizeof c->err) k = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err + k, sizeof c->err - (size_t)k, fmt, ap);
  va_end(ap);
  return NULL;
}

void *jj_alloc(jj_ctx *c, size_t n) {
  c->mem += n + 16;
  if (c->mem > JJ_MAX_MEMORY) {
    jj_fail(c, "the template uses more than %zu MiB while rendering", JJ_MAX_MEMORY >> 20);
    return NULL;
  }
  return base_arena_alloc(&c->arena, n);
}

static jv *mk(jj_ctx *c, jv_kind k) {
  if (c->failed) return NULL;
  jv *v = jj_alloc(c, sizeof *v);
  if (v) v->kind = k;
  return v;
}
jv *jj_undef(jj_ctx *c, const char *hint) {
  jv *v = mk(c, JV_UNDEF);
  if (v) v->s = hint;
  return v;
}
/* none, true and false are shared (never changed): comparisons and tests allocate nothing */
static jv NONE_V = {.kind = JV_NONE}, TRUE_V = {.kind = JV_BOOL, .b = true},
          FALSE_V = {.kind = JV_BOOL, .b = false};
jv *jj_none(jj_ctx *c) { return c->failed ? NULL : &NONE_V; }
jv *jj_bool(jj_ctx *c, bool b) { return c->failed ? NULL : b ? &TRUE_V : &FALSE_V; }
jv *jj_int(jj_ctx *c, int64_t i) {
  jv *v = mk(c, JV_INT);
  if (v) v->i = i;
  return v;
}
jv *jj_float(jj_ctx *c, double f) {
  jv *v = mk(c, JV_FLOAT);
  if (v) v->f = f;
  return v;
}
jv *jj_str(jj_ctx *c, const char *s, size_t n) {
  jv *v = mk(c, JV_STR);
  if (!v) return NULL;
  char *p = jj_alloc(c, n + 1);
  if (!p) return NULL;
  if (n && s) memcpy(p, s, n);
  v->s = p;
  v->n = n;
  return v;
}
jv *jj_list(jj_ctx *c) { return mk(c, JV_LIST); }
jv *jj_dict(jj_ctx *c) { return mk(c, JV_DICT); }
jv *jj_func(jj_ctx *c, const char *name, jj_fn fn, jv *self) {
  jv *v = mk(c, JV_FUNC);
  if (!v) return NULL;
  v->fname = name;
  v->fn = fn;
  v->self = self;
  return v;
}

static bool grow(jj_ctx *c, jv *l) {
  if (l->len < l->cap) return true;
  size_t cap = l->cap ? l->cap * 2 : 4;
  jv **items = jj_alloc(c, cap * sizeof *items);
  if (!items) return false;
  if (l->len) memcpy(items, l->items, l->len * sizeof *items);
  l->items = items;
  if (l->kind == JV_DICT) {
    jv **keys = jj_alloc(c, cap * sizeof *keys);
    if (!keys) return false;
    if (l->len) memcpy(keys, l->keys, l->len * sizeof *keys);
    l->keys = keys;
  }
  l->cap = cap;
  return true;
}

bool jj_push(jj_ctx *c, jv *list, jv *x) {
  if (!x || !grow(c, list)) return false;
  list->items[list->len++] = x;
  return true;
}

bool jj_dict_set(jj_ctx *c, jv *d, jv *key, jv *x) {
  if (!key || !x) return false;
  for (size_t i = 0; i < d->len; i++)
    if (jj_equal(d->keys[i], key)) {
      d->items[i] = x;
      return true;
    }
  if (!grow(c, d)) return false;
  d->keys[d->len] = key;
  d->items[d->len++] = x;
  return true;
}

jv *jj_dict_get(const jv *d, const char *key, size_t n) {
  for (size_t i = 0; i < d->len; i++) {
    const jv *k = d->keys[i];
    if (k->kind == JV_STR && k->n == n && !memcmp(k->s, key, n)) return d->items[i];
  }
  return NULL;
}

jv *jj_from_json(jj_ctx *c, const void *item) {
  const cJSON *j = item;
  if (++c->depth > JJ_MAX_DEPTH) return jj_fail(c, "the context's JSON nests too deeply");
  jv *v = NULL;
  if (cJSON_IsNull(j)) {
    v = jj_none(c);
  } else if (cJSON_IsBool(j)) {
    v = jj_bool(c, cJSON_IsTrue(j));
  } else if (cJSON_IsNumber(j)) {
    double d = j->valuedouble;
    /* cJSON keeps no text: an integral number within 2^53 is an int, as json.loads gives for
       numbers written without a fraction or an exponent */
    if (d == floor(d) && fabs(d) < 9007199254740992.0)
      v = jj_int(c, (int64_t)d);
    else
      v = jj_float(c, d);
  } else if (cJSON_IsString(j)) {
    v = jj_str(c, j->valuestring, strlen(j->valuestring));
  } else if (cJSON_IsArray(j)) {
    v = jj_list(c);
    const cJSON *e;
    cJSON_ArrayForEach(e, j) if (v && !jj_push(c, v, jj_from_json(c, e))) v = NULL;
  } else if (cJSON_IsObject(j)) {
    v = jj_dict(c);
    const cJSON *e;
    cJSON_ArrayForEach(e, j) {
      if (v && !jj_dict_set(c, v, jj_str(c, e->string, strlen(e->string)), jj_from_json(c, e)))
        v = NULL;
    }
  } else {
    v = jj_fail(c, "the context holds a JSON value of an unknown kind");
  }
  c->depth--;
  return v;
}

/* ---- scopes ---- */
static jv *lookup(jj_ctx *c, const char *name) {
  for (jj_scope *s = c->scope; s; s = s->parent)
    for (size_t i = s->n; i-- > 0;)
      if (!strcmp(s->names[i], name)) return s->vals[i];
  return NULL;
}

static bool assign(jj_ctx *c, jj_scope *s, const char *name, jv *v) {
  if (!v) return false;
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->names[i], name)) {
      s->vals[i] = v;
      return true;
    }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 8;
    const char **names = jj_alloc(c, cap * sizeof *names);
    jv **vals = jj_alloc(c, cap * sizeof *vals);
    if (!names || !vals) return false;
    if (s->n) {
      memcpy(names, s->names, s->n * sizeof *names);
      memcpy(vals, s->vals, s->n * sizeof *vals);
    }
    s->names = names;
    s->vals = vals;
    s->cap = cap;
  }
  s->names[s->n] = name;
  s->vals[s->n++] = v;
  return true;
}

static jj_scope *new_scope(jj_ctx *c, jj_scope *parent) {
  jj_scope *s = jj_alloc(c, sizeof *s);
  if (s) s->parent = parent;
  return s;
}

/* ---- expressions ---- */
static jv *eval(jj_ctx *c, const jj_node *n);

static bool as_number(const jv *v, double *f, int64_t *i, bool *is_int) {
  switch (v->kind) {
  case JV_BOOL:
    *i = v->b;
    *f = v->b;
    *is_int = true;
    return true;
  case JV_INT:
    *i = v->i;
    *f = (double)v->i;
    *is_int = true;
    return true;
  case JV_FLOAT:
    *f = v->f;
    *is_int = false;
    return true;
  default:
    return false;
  }
}

static jv *undefined_error(jj_ctx *c, const jv *v) {
  return jj_fail(c, "%s", v->s ? v->s : "a value is undefined");
}

static jv *repeat(jj_ctx *c, const jv *seq, int64_t k) {
  if (k < 0) k = 0;
  if (seq->kind == JV_STR) {
    if (seq->n && (uint64_t)k > JJ_MAX_OUTPUT / seq->n)
      return jj_fail(c, "a string repeated too many times");
    rx_strbuf b = {0};
    base_strbuf_append(&b, "");
    for (int64_t r = 0; r < k; r++) base_strbuf_appendn(&b, seq->s, seq->n);
    jv *v = jj_str(c, b.data, b.len);
    base_strbuf_free(&b);
    return v;
  }
  if (seq->len && (uint64_t)k > JJ_MAX_OUTPUT / seq->len)
    return jj_fail(c, "a list repeated too many times");
  jv *l = jj_list(c);
  for (int64_t r = 0; l && r < k; r++)
    for (size_t i = 0; i < seq->len; i++)
      if (!jj_push(c, l, seq->items[i])) return NULL;
  return l;
}

static jv *arith(jj_ctx *c, int op, jv *a, jv *b) {
  if (a->kind == JV_UNDEF) return undefined_error(c, a);
  if (b->kind == JV_UNDEF) return undefined_error(c, b);
  double fa = 0, fb = 0;
  int64_t ia = 0, ib = 0;
  bool inta = false, intb = false;
  bool na = as_number(a, &fa, &ia, &inta), nb = as_number(b, &fb, &ib, &intb);
  if (na && nb) {
    bool ints = inta && intb;
    switch (op) {
    case JJ_ADD:
      if (ints && !__builtin_add_overflow(ia, ib, &ia)) return jj_int(c, ia);
      return jj_float(c, fa + fb);
    case JJ_SUB:
      if (ints && !__builtin_sub_overflow(ia, ib, &ia)) return jj_int(c, ia);
      return jj_float(c, fa - fb);
    case JJ_MUL:
      if (ints && !__builtin_mul_overflow(ia, ib, &ia)) return jj_int(c, ia);
      return jj_float(c, fa * fb);
    case JJ_DIV:
      if (fb == 0) return jj_fail(c, "division by zero");
      return jj_float(c, fa / fb);
    case JJ_FLOORDIV:
    case JJ_MOD:
      if (fb == 0) return jj_fail(c, "%s by zero", op == JJ_MOD ? "modulo" : "division");
      if (ints && !(ia == INT64_MIN && ib == -1)) {
        int64_t q = ia / ib, r = ia % ib;
        if (r != 0 && ((r < 0) != (ib < 0))) {
          q--;
          r += ib;
        }
        return jj_int(c, op == JJ_MOD ? r : q);
      } else {
        double q = floor(fa / fb), r = fmod(fa, fb);
        if (r != 0 && ((r < 0) != (fb < 0))) r += fb;
        return jj_float(c, op == JJ_MOD ? r : q);
      }
    case JJ_POW:
      if (ints && ib >= 0) {
        int64_t r = 1;
        for (int64_t k = 0; k < ib; k++)
          if (__builtin_mul_overflow(r, ia, &r)) return jj_float(c, pow(fa, fb));
        return jj_int(c, r);
      }
      return jj_float(c, pow(fa, fb));
    }
  }
  if (op == JJ_ADD && a->kind == JV_STR && b->kind == JV_STR) {
    if (a->n + b->n > JJ_MAX_OUTPUT) return jj_fail(c, "a string longer than the output limit");
    jv *v = jj_str(c, NULL, a->n + b->n);
    if (!v) return NULL;
    if (a->n) memcpy((char *)v->s, a->s, a->n);
    if (b->n) memcpy((char *)v->s + a->n, b->s, b->n);
    return v;
  }
  if (op == JJ_ADD && a->kind == JV_LIST && b->kind == JV_LIST) {
    jv *l = jj_list(c);
    for (size_t i = 0; l && i < a->len; i++) jj_push(c, l, a->items[i]);
    for (size_t i = 0; l && i < b->len; i++) jj_push(c, l, b->items[i]);
    if (l) l->tuple = a->tuple && b->tuple;
    return c->failed ? NULL : l;
  }
  if (op == JJ_MUL && (a->kind == JV_STR || a->kind == JV_LIST) && nb && intb)
    return repeat(c, a, ib);
  if (op == JJ_MUL && (b->kind == JV_STR || b->kind == JV_LIST) && na && inta)
    return repeat(c, b, ia);
  static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**", "~"};
  return jj_fail(c, "unsupported operand types for %s: %s and %s", names[op], jj_kind_name(a),
                 jj_kind_name(b));
}

/* a < b etc.: -2 on error, else <0, 0, >0 */
static int order(jj_ctx *c, const jv *a, const jv *b, const char *opname) {
  double fa = 0, fb = 0;
  int64_t ia = 0, ib = 0;
  bool inta = false, intb = false;
  if (as_number(a, &fa, &ia, &inta) && as_number(b, &fb, &ib, &intb)) {
    if (inta && intb) return ia < ib ? -1 : ia > ib;
    return fa < fb ? -1 : fa > fb;
  }
  if (a->kind == JV_STR && b->kind == JV_STR) {
    size_t m = a->n < b->n ? a->n : b->n;
    int r = memcmp(a->s, b->s, m);
    if (r) return r < 0 ? -1 : 1;
    return a->n < b->n ? -1 : a->n > b->n;
  }
  if (a->kind == JV_LIST && b->kind == JV_LIST) {
    for (size_t i = 0; i < a->len && i < b->len; i++) {
      if (jj_equal(a->items[i], b->items[i])) continue;
      return order(c, a->items[i], b->items[i], opname);
    }
    return a->len < b->len ? -1 : a->len > b->len;
  }
  if (a->kind == JV_UNDEF) return undefined_error(c, a), -2;
  if (b->kind == JV_UNDEF) return undefined_error(c, b), -2;
  jj_fail(c, "'%s' is not supported between %s and %s", opname, jj_kind_name(a), jj_kind_name(b));
  return -2;
}

/* x in container: -1 on error */
static int contains(jj_ctx *c, const jv *x, const jv *box) {
  switch (box->kind) {
  case JV_STR:
    if (x->kind != JV_STR) {
      jj_fail(c, "'in <string>' needs a string on the left, not %s", jj_kind_name(x));
      return -1;
    }
    if (!x->n) return 1;
    for (size_t i = 0; i + x->n <= box->n; i++)
      if (!memcmp(box->s + i, x->s, x->n)) return 1;
    return 0;
  case JV_LIST:
    for (size_t i = 0; i < box->len; i++)
      if (jj_equal(x, box->items[i])) return 1;
    return 0;
  case JV_DICT:
    for (size_t i = 0; i < box->len; i++)
      if (jj_equal(x, box->keys[i])) return 1;
    return 0;
  case JV_UNDEF:
    return 0; /* jinja2's Undefined iterates as empty */
  default:
    jj_fail(c, "'in' needs a container on the right, not %s", jj_kind_name(box));
    return -1;
  }
}

static jv *compare(jj_ctx *c, const jj_node *n) {
  jv *a = eval(c, n->a);
  if (!a) return NULL;
  for (size_t k = 0; k < n->args.n; k++) {
    jv *b = eval(c, n->args.v[k]);
    if (!b) return NULL;
    int op = n->ops[k];
    bool r;
    int o;
    switch (op) {
    case JJ_EQ:
      r = jj_equal(a, b);
      break;
    case JJ_NE:
      r = !jj_equal(a, b);
      break;
    case JJ_IN:
    case JJ_NOTIN:
      o = contains(c, a, b);
      if (o < 0) return NULL;
      r = op == JJ_IN ? o : !o;
      break;
    default: {
      static const char *const names[] = {"<", "<=", ">", ">="};
      o = order(c, a, b, names[op - JJ_LT]);
      if (o == -2) return NULL;
      r = op == JJ_LT ? o < 0 : op == JJ_LE ? o <= 0 : op == JJ_GT ? o > 0 : o >= 0;
    }
    }
    if (!r) return jj_bool(c, false);
    a = b;
  }
  return jj_bool(c, true);
}

/* Python's index normalization; false when out of range */
static bool norm_index(int64_t i, size_t len, size_t *out) {
  if (i < 0) i += (int64_t)len;
  if (i < 0 || (uint64_t)i >= len) return false;
  *out = (size_t)i;
  return true;
}

/* offsets of a string's code points (n + 1 entries, the last one n) */
static size_t *char_offsets(jj_ctx *c, const jv *s, size_t *count) {
  size_t m = jj_utf8_len(s->s, s->n);
  size_t *off = jj_alloc(c, (m + 1) * sizeof *off);
  if (!off) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < s->n; i++)
    if (((unsigned char)s->s[i] & 0xC0) != 0x80) off[k++] = i;
  off[k] = s->n;
  *count = k;
  return off;
}

static jv *item(jj_ctx *c, jv *obj, jv *key) {
  if (obj->kind == JV_UNDEF) return undefined_error(c, obj);
  if (obj->kind == JV_DICT) {
    for (size_t i = 0; i < obj->len; i++)
      if (jj_equal(obj->keys[i], key)) return obj->items[i];
    if (key->kind == JV_STR && !obj->ns) return jj_getattr(c, obj, key->s);
    rx_strbuf b = {0};
    base_strbuf_append(&b, "'dict object' has no attribute ");
    jj_repr(c, key, &b);
    const char *hint = base_arena_strdup(&c->arena, b.data);
    base_strbuf_free(&b);
    return jj_undef(c, hint);
  }
  if ((obj->kind == JV_LIST || obj->kind == JV_STR) &&
      (key->kind == JV_INT || key->kind == JV_BOOL)) {
    int64_t i = key->kind == JV_INT ? key->i : key->b;
    size_t at;
    if (obj->kind == JV_LIST) {
      if (norm_index(i, obj->len, &at)) return obj->items[at];
    } else {
      size_t m;
      size_t *off = char_offsets(c, obj, &m);
      if (!off) return NULL;
      if (norm_index(i, m, &at)) return jj_str(c, obj->s + off[at], off[at + 1] - off[at]);
    }
    return jj_undef(c, base_arena_printf(&c->arena, "'%s object' has no element %lld",
                                         obj->kind == JV_LIST ? "list" : "str", (long long)i));
  }
  if (key->kind == JV_STR) return jj_getattr(c, obj, key->s);
  return jj_undef(c, base_arena_printf(&c->arena, "%s has no element of %s", jj_kind_name(obj),
                                       jj_kind_name(key)));
}

static bool slice_bound(jj_ctx *c, const jj_node *e, int64_t *out, bool *given) {
  *given = false;
  if (!e) return true;
  jv *v = eval(c, e);
  if (!v) return false;
  if (v->kind == JV_NONE) return true;
  if (v->kind != JV_INT && v->kind != JV_BOOL) {
    jj_fail(c, "slice indices must be integers or none, not %s", jj_kind_name(v));
    return false;
  }
  *out = v->kind == JV_INT ? v->i : v->b;
  *given = true;
  return true;
}

/* obj[b:c:d] with Python's rules for negative and missing bounds and steps */
static jv *slice(jj_ctx *c, const jj_node *n) {
  jv *obj = eval(c, n->a);
  if (!obj) return NULL;
  int64_t lo = 0, hi = 0, step = 1;
  bool glo, ghi, gst;
  if (!slice_bound(c, n->b, &lo, &glo) || !slice_bound(c, n->c, &hi, &ghi) ||
      !slice_bound(c, n->d, &step, &gst))
    return NULL;
  if (!gst) step = 1;
  if (step == 0) return jj_fail(c, "slice step cannot be zero");
  if (obj->kind == JV_UNDEF) return undefined_error(c, obj);
  size_t *off = NULL;
  size_t len;
  if (obj->kind == JV_STR) {
    if (!(off = char_offsets(c, obj, &len))) return NULL;
  } else if (obj->kind == JV_LIST) {
    len = obj->len;
  } else {
    return jj_fail(c, "%s cannot be sliced", jj_kind_name(obj));
  }
  int64_t L = (int64_t)len;
  if (!glo)
    lo = step > 0 ? 0 : L - 1;
  else if (lo < 0)
    lo = lo + L < 0 ? (step > 0 ? 0 : -1) : lo + L;
  else if (lo >= L)
    lo = step > 0 ? L : L - 1;
  if (!ghi)
    hi = step > 0 ? L : -1;
  else if (hi < 0)
    hi = hi + L < 0 ? (step > 0 ? 0 : -1) : hi + L;
  else if (hi >= L)
    hi = step > 0 ? L : L - 1;
  if (obj->kind == JV_STR) {
    rx_strbuf b = {0};
    base_strbuf_append(&b, "");
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step)
      base_strbuf_appendn(&b, obj->s + off[i], off[i + 1] - off[i]);
    jv *v = jj_str(c, b.data, b.len);
    base_strbuf_free(&b);
    return v;
  }
  jv *l = jj_list(c);
  for (int64_t i = lo; l && (step > 0 ? i < hi : i > hi); i += step)
    if (!jj_push(c, l, obj->items[i])) return NULL;
  if (l) l->tuple = obj->tuple;
  return l;
}

/* evaluates n's arguments: positional into *args, keywords into kn/kv */
static bool eval_args(jj_ctx *c, const jj_node *n, jv ***args, jv ***kv) {
  *args = jj_alloc(c, (n->args.n + 1) * sizeof **args);
  *kv = jj_alloc(c, (n->body2.n + 1) * sizeof **kv);
  if (!*args || !*kv) return false;
  for (size_t i = 0; i < n->args.n; i++)
    if (!((*args)[i] = eval(c, n->args.v[i]))) return false;
  for (size_t i = 0; i < n->body2.n; i++)
    if (!((*kv)[i] = eval(c, n->body2.v[i]))) return false;
  return true;
}

static jv *eval_collection(jj_ctx *c, const jj_node *n) {
  jv *v = n->kind == JN_DICT ? jj_dict(c) : jj_list(c);
  if (!v) return NULL;
  v->tuple = n->kind == JN_TUPLE;
  for (size_t i = 0; i < n->args.n; i++) {
    jv *x = eval(c, n->args.v[i]);
    if (!x) return NULL;
    if (n->kind != JN_DICT) {
      if (!jj_push(c, v, x)) return NULL;
      continue;
    }
    jv *y = eval(c, n->args.v[++i]);
    if (!y || !jj_dict_set(c, v, x, y)) return NULL;
  }
  return v;
}

static jv *eval_inner(jj_ctx *c, const jj_node *n) {
  jv *a, *b, **args, **kv;
  switch (n->kind) {
  case JN_CONST:
    return (jv *)n->value;
  case JN_NAME:
    if ((a = lookup(c, n->name))) return a;
    if ((a = jj_global(c, n->name))) return a;
    return c->failed ? NULL
                     : jj_undef(c, base_arena_printf(&c->arena, "'%s' is undefined", n->name));
  case JN_LIST:
  case JN_TUPLE:
  case JN_DICT:
    return eval_collection(c, n);
  case JN_ATTR:
    if (!(a = eval(c, n->a))) return NULL;
    if (a->kind == JV_UNDEF) return undefined_error(c, a);
    return jj_getattr(c, a, n->name);
  case JN_ITEM:
    if (!(a = eval(c, n->a)) || !(b = eval(c, n->b))) return NULL;
    return item(c, a, b);
  case JN_SLICE:
    return slice(c, n);
  case JN_CALL:
    if (!(a = eval(c, n->a)) || !eval_args(c, n, &args, &kv)) return NULL;
    return jj_call(c, a, args, n->args.n, n->names, kv, n->body2.n);
  case JN_FILTER:
    if (!(a = eval(c, n->a)) || !eval_args(c, n, &args, &kv)) return NULL;
    c->line = n->line;
    c->col = n->col;
    return jj_filter(c, n->name, a, args, n->args.n, n->names, kv, n->body2.n);
  case JN_TEST: {
    if (!(a = eval(c, n->a)) || !eval_args(c, n, &args, &kv)) return NULL;
    c->line = n->line;
    c->col = n->col;
    int r = jj_test(c, n->name, a, args, n->args.n);
    return r < 0 ? NULL : jj_bool(c, n->neg ? !r : r);
  }
  case JN_BINOP:
    if (!(a = eval(c, n->a)) || !(b = eval(c, n->b))) return NULL;
    c->line = n->line;
    c->col = n->col;
    if (n->op == JJ_CONCAT) {
      rx_strbuf s = {0};
      base_strbuf_append(&s, "");
      bool ok = jj_str_of(c, a, &s) && jj_str_of(c, b, &s);
      jv *v = ok ? jj_str(c, s.data, s.len) : NULL;
      base_strbuf_free(&s);
      return v;
    }
    return arith(c, n->op, a, b);
  case JN_NEG:
  case JN_POS:
    if (!(a = eval(c, n->a))) return NULL;
    if (a->kind == JV_INT && n->kind == JN_NEG && a->i != INT64_MIN) return jj_int(c, -a->i);
    if (a->kind == JV_INT || a->kind == JV_BOOL) return jj_int(c, a->kind == JV_INT ? a->i : a->b);
    if (a->kind == JV_FLOAT) return jj_float(c, n->kind == JN_NEG ? -a->f : a->f);
    return jj_fail(c, "bad operand type for unary %c: %s", n->kind == JN_NEG ? '-' : '+',
                   jj_kind_name(a));
  case JN_NOT:
    if (!(a = eval(c, n->a))) return NULL;
    return jj_bool(c, !jj_truthy(a));
  case JN_AND:
  case JN_OR:
    if (!(a = eval(c, n->a))) return NULL;
    if (jj_truthy(a) == (n->kind == JN_OR)) return a;
    return eval(c, n->b);
  case JN_COND:
    if (!(b = eval(c, n->b))) return NULL;
    if (jj_truthy(b)) return eval(c, n->a);
    if (n->c) return eval(c, n->c);
    return jj_undef(c, "the conditional expression's condition was false and it has no else");
  case JN_COMPARE:
    return compare(c, n);
  default:
    return jj_fail(c, "a statement where an expression was expected");
  }
}

static jv *eval(jj_ctx *c, const jj_node *n) {
  if (c->failed) return NULL;
  if (++c->steps > JJ_MAX_STEPS) return jj_fail(c, "the template takes too many steps to render");
  if (++c->depth > JJ_MAX_DEPTH) return jj_fail(c, "the template recurses too deeply");
  int line = c->line, col = c->col;
  c->line = n->line;
  c->col = n->col;
  jv *v = eval_inner(c, n);
  if (v) {
    c->line = line;
    c->col = col;
  }
  c->depth--;
  return v;
}

/* ---- statements ---- */
static bool exec_body(jj_ctx *c, const jn_list *body);

static bool emit(jj_ctx *c, const char *s, size_t n) {
  if (c->out->len + n > JJ_MAX_OUTPUT)
    return jj_fail(c, "the rendered text passes %zu MiB", JJ_MAX_OUTPUT >> 20), false;
  base_strbuf_appendn(c->out, s, n);
  return true;
}

/* The loop variable: made once per loop (made when loop is NULL), its values updated in place
 * for iteration i of items, so a long loop costs no memory per iteration. */
static jv *loop_var(jj_ctx *c, jv *loop, jv *items, size_t i, jv *cycle) {
  static const char *const keys[] = {"index",  "index0",   "revindex", "revindex0",
                                     "first",  "last",     "length",   "depth",
                                     "depth0", "previtem", "nextitem", "cycle"};
  size_t n = items->len;
  if (!loop) {
    if (!(loop = jj_dict(c))) return NULL;
    for (size_t k = 0; k < RX_ARRAY_LEN(keys); k++) {
      jv *v = k < 6 || k == 6 || k == 7 || k == 8 ? jj_int(c, 0) : cycle;
      if (v && (k == 4 || k == 5)) v->kind = JV_BOOL; /* first, last: changed in place */
      if (!jj_dict_set(c, loop, jj_str(c, keys[k], strlen(keys[k])), v)) return NULL;
    }
    loop->items[7]->i = 1;
  }
  jv **v = loop->items;
  v[0]->i = (int64_t)i + 1;
  v[1]->i = (int64_t)i;
  v[2]->i = (int64_t)(n - i);
  v[3]->i = (int64_t)(n - i - 1);
  v[4]->b = i == 0;
  v[5]->b = i + 1 == n;
  v[6]->i = (int64_t)n;
  v[9] = i ? items->items[i - 1] : jj_undef(c, "there is no previous item");
  v[10] = i + 1 < n ? items->items[i + 1] : jj_undef(c, "there is no next item");
  return c->failed ? NULL : loop;
}

static jv *loop_cycle(jj_ctx *c, jv *self, jv **args, size_t n, const char **kn, jv **kv,
                      size_t nk) {
  (void)kn;
  (void)kv;
  if (!n || nk) return jj_fail(c, "loop.cycle takes one or more positional arguments");
  jv *i = jj_dict_get(self, "index0", 6);
  return args[(size_t)i->i % n];
}

static bool bind_targets(jj_ctx *c, jj_scope *s, const jj_node *n, jv *x) {
  if (n->nnames == 1) return assign(c, s, n->names[0], x);
  if (x->kind != JV_LIST || x->len != n->nnames) {
    jj_fail(c, "cannot unpack %s into %zu names", jj_kind_name(x), n->nnames);
    return false;
  }
  for (size_t k = 0; k < n->nnames; k++)
    if (!assign(c, s, n->names[k], x->items[k])) return false;
  return true;
}

static bool exec_for(jj_ctx *c, const jj_node *n) {
  jv *seq = eval(c, n->a);
  if (!seq) return false;
  jv *all = jj_iter_list(c, seq);
  if (!all) return false;
  jj_scope *s = new_scope(c, c->scope), *outer = c->scope;
  if (!s) return false;
  jv *items = all;
  if (n->b) { /* `for x in y if cond`: the condition sees the targets, before loop exists */
    items = jj_list(c);
    if (!items) return false;
    c->scope = s;
    for (size_t i = 0; i < all->len; i++) {
      jv *cond;
      if (!bind_targets(c, s, n, all->items[i]) || !(cond = eval(c, n->b))) {
        c->scope = outer;
        return false;
      }
      if (jj_truthy(cond) && !jj_push(c, items, all->items[i])) break;
    }
    c->scope = outer;
    if (c->failed) return false;
  }
  if (!items->len) return exec_body(c, &n->body2);
  jv *cycle = jj_func(c, "loop.cycle", loop_cycle, NULL);
  c->scope = s;
  bool ok = true, completed = false; /* did any iteration reach the end of the body? */
  jv *loop = NULL;
  for (size_t i = 0; ok && i < items->len; i++) {
    if (!cycle || !(loop = loop_var(c, loop, items, i, cycle))) {
      ok = false;
      break;
    }
    cycle->self = loop;
    ok = assign(c, s, "loop", loop) && bind_targets(c, s, n, items->items[i]) &&
         exec_body(c, &n->args);
    completed = completed || (ok && !c->brk);
    if (c->brk == 1) {
      c->brk = 0;
      break;
    }
    c->brk = 0;
  }
  c->scope = outer;
  /* jinja2 runs the else body unless an iteration ended normally: a loop whose every iteration
     ended in break or continue runs it too (its indicator is cleared at the body's end) */
  if (ok && !c->failed && !completed) return exec_body(c, &n->body2);
  return ok && !c->failed;
}

static bool exec_set(jj_ctx *c, const jj_node *n) {
  if (n->kind == JN_SETBLOCK) {
    rx_strbuf *saved = c->out, buf = {0};
    base_strbuf_append(&buf, "");
    c->out = &buf;
    bool ok = exec_body(c, &n->args);
    c->out = saved;
    ok = ok && assign(c, c->scope, n->name, jj_str(c, buf.data, buf.len));
    base_strbuf_free(&buf);
    return ok;
  }
  jv *v = eval(c, n->a);
  if (!v) return false;
  if (n->name2) {
    jv *ns = lookup(c, n->name);
    if (!ns || ns->kind != JV_DICT || !ns->ns) {
      jj_fail(c, "cannot set the attribute '%s' of '%s': it is not a namespace()", n->name2,
              n->name);
      return false;
    }
    return jj_dict_set(c, ns, jj_str(c, n->name2, strlen(n->name2)), v);
  }
  return bind_targets(c, c->scope, n, v);
}

static bool exec_stmt(jj_ctx *c, const jj_node *n) {
  if (++c->steps > JJ_MAX_STEPS) return jj_fail(c, "the template takes too many steps"), false;
  c->line = n->line;
  c->col = n->col;
  jv *v;
  switch (n->kind) {
  case JN_TEXT:
    return emit(c, n->name, n->len);
  case JN_OUTPUT: {
    if (!(v = eval(c, n->a))) return false;
    rx_strbuf s = {0};
    base_strbuf_append(&s, "");
    bool ok = jj_str_of(c, v, &s) && emit(c, s.data, s.len);
    base_strbuf_free(&s);
    return ok;
  }
  case JN_IF:
    if (!(v = eval(c, n->a))) return false;
    return exec_body(c, jj_truthy(v) ? &n->args : &n->body2);
  case JN_FOR:
    return exec_for(c, n);
  case JN_SET:
  case JN_SETBLOCK:
    return exec_set(c, n);
  case JN_MACRO:
    if (!(v = mk(c, JV_MACRO))) return false;
    v->macro = n;
    return assign(c, c->scope, n->name, v);
  case JN_BREAK:
    c->brk = 1;
    return true;
  case JN_CONTINUE:
    c->brk = 2;
    return true;
  case JN_BLOCK:
    return exec_body(c, &n->args);
  default:
    return jj_fail(c, "an expression where a statement was expected"), false;
  }
}

static bool exec_body(jj_ctx *c, const jn_list *body) {
  if (++c->depth > JJ_MAX_DEPTH) return jj_fail(c, "the template recurses too deeply"), false;
  for (size_t i = 0; i < body->n && !c->brk; i++)
    if (!exec_stmt(c, body->v[i])) return false;
  c->depth--;
  return true;
}

/* a macro call: arguments bound to the parameters in a scope above the template's top level */
static jv *call_macro(jj_ctx *c, const jj_node *m, jv **args, size_t n, const char **kn, jv **kv,
                      size_t nk) {
  if (n > m->nnames)
    return jj_fail(c, "macro '%s' takes %zu arguments, %zu given", m->name, m->nnames, n);
  jj_scope *s = new_scope(c, c->root), *outer = c->scope;
  if (!s) return NULL;
  for (size_t k = 0; k < nk; k++) {
    size_t p = 0;
    while (p < m->nnames && strcmp(m->names[p], kn[k])) p++;
    if (p == m->nnames) return jj_fail(c, "macro '%s' has no parameter '%s'", m->name, kn[k]);
    if (p < n) return jj_fail(c, "macro '%s' got '%s' twice", m->name, kn[k]);
  }
  c->scope = s;
  for (size_t p = 0; p < m->nnames; p++) {
    jv *v = p < n ? args[p] : NULL;
    for (size_t k = 0; k < nk && !v; k++)
      if (!strcmp(m->names[p], kn[k])) v = kv[k];
    if (!v && m->body2.v[p]) v = eval(c, m->body2.v[p]);
    if (!v && !c->failed)
      v = jj_undef(c, base_arena_printf(&c->arena, "'%s' is undefined", m->names[p]));
    if (!assign(c, s, m->names[p], v)) {
      c->scope = outer;
      return NULL;
    }
  }
  rx_strbuf *saved = c->out, buf = {0};
  base_strbuf_append(&buf, "");
  c->out = &buf;
  int line = c->line, col = c->col;
  bool ok = exec_body(c, &m->args);
  c->out = saved;
  c->scope = outer;
  c->brk = 0;
  jv *r = ok ? jj_str(c, buf.data, buf.len) : NULL;
  base_strbuf_free(&buf);
  if (r) {
    c->line = line;
    c->col = col;
  }
  return r;
}

jv *jj_call(jj_ctx *c, jv *f, jv **args, size_t n, const char **kn, jv **kv, size_t nk) {
  if (f->kind == JV_MACRO) return call_macro(c, f->macro, args, n, kn, kv, nk);
  if (f->kind == JV_FUNC) return f->fn(c, f->self, args, n, kn, kv, nk);
  if (f->kind == JV_UNDEF) return undefined_error(c, f);
  return jj_fail(c, "%s is not callable", jj_kind_name(f));
}

/* ---- the public functions ---- */
rx_status rx_chat_template_parse(const char *text, size_t len, const char *name,
                                 const char *bos_token, const char *eos_token,
                                 rx_chat_template **out) {
  *out = NULL;
  if (!text) return base_status_make(RX_ERR_INVALID, "a chat template needs its text");
  rx_chat_template *t = base_calloc(1, sizeof *t);
  base_arena_init(&t->arena);
  t->name = base_arena_strdup(&t->arena, name ? name : "chat_template");
  t->bos = base_arena_strdup(&t->arena, bos_token ? bos_token : "");
  t->eos = base_arena_strdup(&t->arena, eos_token ? eos_token : "");
  rx_status s = jj_parse(t, text, len);
  if (s) {
    rx_chat_template_free(t);
    return s;
  }
  *out = t;
  return NULL;
}

void rx_chat_template_free(rx_chat_template *t) {
  if (!t) return;
  base_arena_free(&t->arena);
  free(t);
}

const char *rx_chat_template_bos(const rx_chat_template *t) { return t->bos; }

static void set_default(jj_ctx *c, const char *name, jv *v) {
  if (!lookup(c, name)) assign(c, c->root, name, v);
}

rx_status rx_chat_template_render(const rx_chat_template *t, const char *context_json, size_t len,
                                  int64_t now, char **out_text, size_t *out_len) {
  *out_text = NULL;
  if (out_len) *out_len = 0;
  cJSON *ctx = cJSON_ParseWithLength(context_json ? context_json : "{}", context_json ? len : 2);
  if (!ctx || !cJSON_IsObject(ctx)) {
    cJSON_Delete(ctx);
    return base_status_make(RX_ERR_INVALID, "%s: the render's context must be a JSON object",
                            t->name);
  }
  rx_strbuf out = {0};
  base_strbuf_append(&out, "");
  jj_ctx c = {.t = t, .out = &out, .line = 1, .col = 1};
  base_arena_init(&c.arena);
  c.root = c.scope = new_scope(&c, NULL);
  c.now = now;
  const cJSON *e;
  cJSON_ArrayForEach(e, ctx) {
    if (!c.failed) assign(&c, c.root, base_arena_strdup(&c.arena, e->string), jj_from_json(&c, e));
  }
  cJSON_Delete(ctx);
  set_default(&c, "bos_token", jj_str(&c, t->bos, strlen(t->bos)));
  set_default(&c, "eos_token", jj_str(&c, t->eos, strlen(t->eos)));
  set_default(&c, "add_generation_prompt", jj_bool(&c, false));
  if (!c.failed) exec_body(&c, &t->body);
  rx_status s = NULL;
  if (c.failed) {
    s = base_status_make(RX_ERR_INVALID, "%s", c.err);
    base_strbuf_free(&out);
  } else {
    if (out_len) *out_len = out.len;
    *out_text = base_strbuf_take(&out);
  }
  base_arena_free(&c.arena);
  return s;
}
