/* runtime/llm/grammar_schema.c: a JSON schema (response_format's json_schema) compiled to the
 * nodes of grammar.h, or json_object's grammar (any JSON object).
 *
 * Supported (docs/llm.md "Structured output"): type (a name or a list of names: object, array,
 * string, number, integer, boolean, null); properties with required (properties in the
 * schema's order, each optional one may be left out; no other property: additionalProperties
 * false is implied, and only false may be written); an object without properties is any object;
 * items, minItems, maxItems; minLength, maxLength; enum and const (any JSON values, written
 * compactly); anyOf (at most G_MAX_ALTS alternatives); $ref to "#" and to "#/$defs/NAME" or
 * "#/definitions/NAME" (recursion too; generation nests at most G_MAX_DEPTH deep). Annotations
 * (title, description, default, examples, $schema, $id, $comment, deprecated, readOnly,
 * writeOnly) are ignored. Every other keyword (pattern, format, minimum, oneOf, allOf, ...) is an
 * RX_ERR_UNSUPPORTED error naming it and where it is: no keyword is silently ignored. */
#include "runtime/llm/grammar.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gdef {
  const cJSON *json;
  int32_t node; /* -1: not compiled yet; -2: being compiled */
  int32_t slot; /* the node reserved for it while it compiles */
} gdef;

typedef struct compiler {
  grammar *g;
  const cJSON *root;
  const cJSON *defs[2]; /* $defs, definitions */
  gdef *refs;           /* one per entry of $defs then definitions; the root last */
  size_t nrefs;
} compiler;

static const char *const annotations[] = {"title",    "description", "default",  "examples",
                                          "$schema",  "$id",         "$comment", "deprecated",
                                          "readOnly", "writeOnly",   "$defs",    "definitions"};
static const char *const handled[] = {"type",      "properties", "required", "additionalProperties",
                                      "items",     "minItems",   "maxItems", "minLength",
                                      "maxLength", "enum",       "const",    "anyOf",
                                      "$ref"};

static rx_status bad(const char *path, const char *fmt, ...) RX_PRINTF(2, 3);
static rx_status bad(const char *path, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return base_status_make(RX_ERR_INVALID, "json schema: at %s: %s", path, msg);
}

static int32_t new_node(grammar *g, gkind kind) {
  if (g->nnodes == g->capnodes) {
    uint32_t nc = g->capnodes ? g->capnodes * 2 : 32;
    gnode *nn = base_arena_alloc(&g->arena, nc * sizeof *nn);
    if (g->nnodes) memcpy(nn, g->nodes, g->nnodes * sizeof *nn);
    g->nodes = nn;
    g->capnodes = nc;
  }
  gnode *n = &g->nodes[g->nnodes];
  memset(n, 0, sizeof *n);
  n->kind = kind;
  n->max = -1;
  n->items = G_NODE_ANY;
  return (int32_t)g->nnodes++;
}

/* s (n bytes) as JSON string content (without quotes), in the arena. */
static gtext json_escaped(grammar *g, const char *s, size_t n) {
  rx_strbuf b = {0};
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      base_strbuf_putc(&b, '\\');
      base_strbuf_putc(&b, (char)c);
    } else if (c < 0x20) {
      base_strbuf_printf(&b, "\\u%04x", c);
    } else {
      base_strbuf_putc(&b, (char)c);
    }
  }
  gtext t = {base_arena_strndup(&g->arena, b.data ? b.data : "", b.len), (uint32_t)b.len};
  base_strbuf_free(&b);
  return t;
}

/* The literal texts of a literal node, from JSON values. */
static void add_literal(grammar *g, gnode *n, const cJSON *v, uint32_t cap) {
  char *text = cJSON_PrintUnformatted(v);
  RX_ASSERT(text); /* cJSON fails only without memory */
  if (!n->lits) n->lits = base_arena_alloc(&g->arena, cap * sizeof *n->lits);
  n->lits[n->nlits].s = base_arena_strdup(&g->arena, text);
  n->lits[n->nlits++].n = (uint32_t)strlen(text);
  free(text);
}

static int32_t fixed_literals(grammar *g, const char *const *texts, size_t count) {
  int32_t id = new_node(g, G_LITERALS);
  gnode *n = &g->nodes[id];
  n->lits = base_arena_alloc(&g->arena, count * sizeof *n->lits);
  for (size_t i = 0; i < count; i++) n->lits[i] = (gtext){texts[i], (uint32_t)strlen(texts[i])};
  n->nlits = (uint32_t)count;
  return id;
}

/* The nodes every grammar starts with (grammar.h). */
static void base_nodes(grammar *g) {
  new_node(g, G_ANY);
  int32_t obj = new_node(g, G_OBJECT);
  g->nodes[obj].open = true;
  new_node(g, G_ARRAY);
  new_node(g, G_STRING);
  new_node(g, G_NUMBER);
  static const char *const tfn[] = {"true", "false", "null"};
  fixed_literals(g, tfn, 3);
}

static rx_status compile(compiler *c, const cJSON *s, const char *path, int depth, int32_t *out);

static bool is_keyword(const char *k, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(k, list[i])) return true;
  return false;
}

/* A non-negative integer keyword of s into *out (absent: unchanged). */
static rx_status count_of(const cJSON *s, const char *name, const char *path, int64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, name);
  if (!v) return NULL;
  if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e9 ||
      v->valuedouble != floor(v->valuedouble))
    return bad(path, "'%s' must be an integer from 0 to 1e9", name);
  *out = (int64_t)v->valuedouble;
  return NULL;
}

static rx_status compile_object(compiler *c, const cJSON *s, const char *path, int depth,
                                int32_t *out) {
  grammar *g = c->g;
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
  const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
  if (addl && !cJSON_IsFalse(addl))
    return bad(path, "'additionalProperties' other than false is not supported (objects hold "
                     "only their 'properties'; without 'properties', any object)");
  if (props && !cJSON_IsObject(props)) return bad(path, "'properties' must be an object");
  if (req && !cJSON_IsArray(req)) return bad(path, "'required' must be an array of names");
  int32_t id = new_node(g, G_OBJECT);
  int np = props ? cJSON_GetArraySize(props) : 0;
  if (!props && !(addl && cJSON_IsFalse(addl))) {
    if (req && cJSON_GetArraySize(req))
      return bad(path, "'required' without 'properties' is not supported");
    g->nodes[id].open = true;
    *out = id;
    return NULL;
  }
  gprop *pr = base_arena_alloc(&g->arena, (size_t)(np + 1) * sizeof *pr);
  uint32_t *next = base_arena_alloc(&g->arena, (size_t)(np + 1) * sizeof *next);
  int i = 0;
  for (const cJSON *p = props ? props->child : NULL; p; p = p->next, i++) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s.properties.%s", path, p->string);
    pr[i].key = json_escaped(g, p->string, strlen(p->string));
    for (int k = 0; k < i; k++)
      if (pr[k].key.n == pr[i].key.n && !memcmp(pr[k].key.s, pr[i].key.s, pr[i].key.n))
        return bad(path, "property '%s' is listed twice", p->string);
    RX_RETURN_IF_ERROR(compile(c, p, sub, depth + 1, &pr[i].node));
  }
  for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
    if (!cJSON_IsString(r)) return bad(path, "'required' must be an array of names");
    gtext k = json_escaped(g, r->valuestring, strlen(r->valuestring));
    int at = -1;
    for (int j = 0; j < np && at < 0; j++)
      if (pr[j].key.n == k.n && !memcmp(pr[j].key.s, k.s, k.n)) at = j;
    if (at < 0)
      return bad(path, "'required' names '%s', which is not in 'properties'", r->valuestring);
    pr[at].required = true;
  }
  next[np] = (uint32_t)np;
  for (int j = np - 1; j >= 0; j--) next[j] = pr[j].required ? (uint32_t)j : next[j + 1];
  gnode *n = &g->nodes[id];
  n->props = pr;
  n->nprops = (uint32_t)np;
  n->next_req = next;
  *out = id;
  return NULL;
}

static rx_status compile_array(compiler *c, const cJSON *s, const char *path, int depth,
                               int32_t *out) {
  int32_t items = G_NODE_ANY;
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(s, "items");
  if (it) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s.items", path);
    RX_RETURN_IF_ERROR(compile(c, it, sub, depth + 1, &items));
  }
  int64_t lo = 0, hi = -1;
  RX_RETURN_IF_ERROR(count_of(s, "minItems", path, &lo));
  RX_RETURN_IF_ERROR(count_of(s, "maxItems", path, &hi));
  if (hi >= 0 && lo > hi)
    return bad(path, "'minItems' %lld > 'maxItems' %lld", (long long)lo, (long long)hi);
  int32_t id = new_node(c->g, G_ARRAY);
  c->g->nodes[id].items = items;
  c->g->nodes[id].min = lo;
  c->g->nodes[id].max = hi;
  *out = id;
  return NULL;
}

static rx_status compile_string(compiler *c, const cJSON *s, const char *path, int32_t *out) {
  int64_t lo = 0, hi = -1;
  RX_RETURN_IF_ERROR(count_of(s, "minLength", path, &lo));
  RX_RETURN_IF_ERROR(count_of(s, "maxLength", path, &hi));
  if (hi >= 0 && lo > hi)
    return bad(path, "'minLength' %lld > 'maxLength' %lld", (long long)lo, (long long)hi);
  int32_t id = new_node(c->g, G_STRING);
  c->g->nodes[id].min = lo;
  c->g->nodes[id].max = hi;
  *out = id;
  return NULL;
}

/* The JSON type name of a value, as a schema's "type" names it. */
static bool value_has_type(const cJSON *v, const char *type) {
  if (!strcmp(type, "string")) return cJSON_IsString(v);
  if (!strcmp(type, "number")) return cJSON_IsNumber(v);
  if (!strcmp(type, "integer"))
    return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
           fabs(v->valuedouble) < 1e15;
  if (!strcmp(type, "boolean")) return cJSON_IsBool(v);
  if (!strcmp(type, "null")) return cJSON_IsNull(v);
  if (!strcmp(type, "object")) return cJSON_IsObject(v);
  if (!strcmp(type, "array")) return cJSON_IsArray(v);
  return false;
}

/* enum or const: the values that also have the schema's type (type NULL: all). */
static rx_status compile_literals(compiler *c, const cJSON *s, const char *type, const char *path,
                                  int32_t *out) {
  const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
  const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
  if (en && (!cJSON_IsArray(en) || !cJSON_GetArraySize(en)))
    return bad(path, "'enum' must be a non-empty array");
  int32_t id = new_node(c->g, G_LITERALS);
  uint32_t cap = (uint32_t)(en ? cJSON_GetArraySize(en) : 0) + 1;
  gnode *n = &c->g->nodes[id];
  for (const cJSON *v = en ? en->child : cn; v; v = en ? v->next : NULL) {
    bool also = !cn || !en; /* enum and const: the const, if the enum has it */
    if (!also) {
      char *a = cJSON_PrintUnformatted(v), *b = cJSON_PrintUnformatted(cn);
      also = a && b && !strcmp(a, b);
      free(a);
      free(b);
    }
    if (also && (!type || value_has_type(v, type))) add_literal(c->g, n, v, cap);
  }
  if (!n->nlits)
    return bad(path, "no value of 'enum'/'const' has the type%s%s", type ? " " : "",
               type ? type : "");
  *out = id;
  return NULL;
}

/* One type's node for schema s. */
static rx_status compile_typed(compiler *c, const cJSON *s, const char *type, const char *path,
                               int depth, int32_t *out) {
  if (cJSON_GetObjectItemCaseSensitive(s, "enum") || cJSON_GetObjectItemCaseSensitive(s, "const"))
    return compile_literals(c, s, type, path, out);
  if (!strcmp(type, "object")) return compile_object(c, s, path, depth, out);
  if (!strcmp(type, "array")) return compile_array(c, s, path, depth, out);
  if (!strcmp(type, "string")) return compile_string(c, s, path, out);
  if (!strcmp(type, "number") || !strcmp(type, "integer")) {
    *out = new_node(c->g, !strcmp(type, "number") ? G_NUMBER : G_INTEGER);
    return NULL;
  }
  static const char *const t[] = {"true", "false"}, *const nul[] = {"null"};
  if (!strcmp(type, "boolean"))
    *out = fixed_literals(c->g, t, 2);
  else if (!strcmp(type, "null"))
    *out = fixed_literals(c->g, nul, 1);
  else
    return bad(path, "unknown type '%s' (object, array, string, number, integer, boolean, null)",
               type);
  return NULL;
}

static rx_status compile_anyof(compiler *c, const cJSON *list, const char *path, int depth,
                               int32_t *out) {
  int na = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
  if (!na) return bad(path, "'anyOf' must be a non-empty array of schemas");
  if (na > G_MAX_ALTS)
    return bad(path, "'anyOf' has %d alternatives, more than the %d supported", na, G_MAX_ALTS);
  int32_t *alts = base_arena_alloc(&c->g->arena, (size_t)na * sizeof *alts);
  int i = 0;
  for (const cJSON *a = list->child; a; a = a->next, i++) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s.anyOf[%d]", path, i);
    RX_RETURN_IF_ERROR(compile(c, a, sub, depth + 1, &alts[i]));
  }
  int32_t id = new_node(c->g, G_ANYOF);
  c->g->nodes[id].alts = alts;
  c->g->nodes[id].nalts = (uint32_t)na;
  *out = id;
  return NULL;
}

/* The definition a local $ref names ("#", "#/$defs/NAME", "#/definitions/NAME"). */
static gdef *ref_target(compiler *c, const char *ref) {
  if (!strcmp(ref, "#")) return &c->refs[c->nrefs - 1];
  static const char *const pre[] = {"#/$defs/", "#/definitions/"};
  size_t at = 0;
  for (int k = 0; k < 2; k++) {
    size_t pl = strlen(pre[k]);
    int i = 0;
    for (const cJSON *d = c->defs[k] ? c->defs[k]->child : NULL; d; d = d->next, i++)
      if (!strncmp(ref, pre[k], pl) && !strcmp(ref + pl, d->string)) return &c->refs[at + i];
    at += c->defs[k] ? (size_t)cJSON_GetArraySize(c->defs[k]) : 0;
  }
  return NULL;
}

static rx_status compile_ref(compiler *c, const cJSON *s, const char *path, int depth,
                             int32_t *out) {
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
  if (!cJSON_IsString(r)) return bad(path, "'$ref' must be a string");
  for (const cJSON *k = s->child; k; k = k->next)
    if (strcmp(k->string, "$ref") && !is_keyword(k->string, annotations, RX_ARRAY_LEN(annotations)))
      return bad(path, "'%s' beside '$ref' is not supported", k->string);
  gdef *d = ref_target(c, r->valuestring);
  if (!d)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "json schema: at %s: '$ref' '%s' is not supported: only \"#\", "
                            "\"#/$defs/NAME\" and \"#/definitions/NAME\" of this schema",
                            path, r->valuestring);
  if (d->node >= 0 || d->node == -2) { /* compiled, or being compiled: its reserved slot */
    *out = d->node >= 0 ? d->node : d->slot;
    return NULL;
  }
  d->node = -2;
  d->slot = new_node(c->g, G_ANY);
  int32_t body = -1;
  char sub[512];
  snprintf(sub, sizeof sub, "%s", r->valuestring);
  RX_RETURN_IF_ERROR(compile(c, d->json, sub, depth + 1, &body));
  if (body == d->slot)
    return bad(path, "'$ref' '%s' refers to itself without a value between", r->valuestring);
  c->g->nodes[d->slot] = c->g->nodes[body];
  d->node = d->slot;
  *out = d->slot;
  return NULL;
}

static rx_status compile(compiler *c, const cJSON *s, const char *path, int depth, int32_t *out) {
  if (depth > G_MAX_SCHEMA_DEPTH)
    return bad(path, "the schema nests deeper than %d", G_MAX_SCHEMA_DEPTH);
  if (c->g->nnodes > G_MAX_NODES)
    return bad(path, "the schema has more than %d parts", G_MAX_NODES);
  if (cJSON_IsTrue(s)) {
    *out = G_NODE_ANY;
    return NULL;
  }
  if (!cJSON_IsObject(s)) return bad(path, "a schema must be an object (or true)");
  for (const cJSON *k = s->child; k; k = k->next)
    if (!is_keyword(k->string, annotations, RX_ARRAY_LEN(annotations)) &&
        !is_keyword(k->string, handled, RX_ARRAY_LEN(handled)))
      return base_status_make(RX_ERR_UNSUPPORTED,
                              "json schema: at %s: the keyword '%s' is not supported", path,
                              k->string);
  if (cJSON_GetObjectItemCaseSensitive(s, "$ref")) return compile_ref(c, s, path, depth, out);
  const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
  if (any) {
    if (type || s->child->next) /* anyOf beside other keywords: not the plain union */
      for (const cJSON *k = s->child; k; k = k->next)
        if (strcmp(k->string, "anyOf") &&
            !is_keyword(k->string, annotations, RX_ARRAY_LEN(annotations)))
          return bad(path, "'%s' beside 'anyOf' is not supported", k->string);
    return compile_anyof(c, any, path, depth, out);
  }
  if (cJSON_IsString(type)) return compile_typed(c, s, type->valuestring, path, depth, out);
  if (cJSON_IsArray(type)) {
    int nt = cJSON_GetArraySize(type);
    if (!nt || nt > G_MAX_ALTS) return bad(path, "'type' must list 1 to %d types", G_MAX_ALTS);
    int32_t *alts = base_arena_alloc(&c->g->arena, (size_t)nt * sizeof *alts);
    int i = 0;
    for (const cJSON *t = type->child; t; t = t->next, i++) {
      if (!cJSON_IsString(t)) return bad(path, "'type' must be a name or a list of names");
      RX_RETURN_IF_ERROR(compile_typed(c, s, t->valuestring, path, depth, &alts[i]));
    }
    int32_t id = new_node(c->g, G_ANYOF);
    c->g->nodes[id].alts = alts;
    c->g->nodes[id].nalts = (uint32_t)nt;
    *out = id;
    return NULL;
  }
  if (type) return bad(path, "'type' must be a name or a list of names");
  if (cJSON_GetObjectItemCaseSensitive(s, "enum") || cJSON_GetObjectItemCaseSensitive(s, "const"))
    return compile_literals(c, s, NULL, path, out);
  /* no type: what the other keywords imply */
  if (cJSON_GetObjectItemCaseSensitive(s, "properties") ||
      cJSON_GetObjectItemCaseSensitive(s, "required") ||
      cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"))
    return compile_object(c, s, path, depth, out);
  if (cJSON_GetObjectItemCaseSensitive(s, "items") ||
      cJSON_GetObjectItemCaseSensitive(s, "minItems") ||
      cJSON_GetObjectItemCaseSensitive(s, "maxItems"))
    return compile_array(c, s, path, depth, out);
  if (cJSON_GetObjectItemCaseSensitive(s, "minLength") ||
      cJSON_GetObjectItemCaseSensitive(s, "maxLength"))
    return compile_string(c, s, path, out);
  *out = G_NODE_ANY;
  return NULL;
}

rx_status llm_grammar_build(grammar *g, const char *schema, size_t len) {
  base_nodes(g);
  if (!schema) { /* json_object */
    g->root = G_NODE_ANY_OBJECT;
    return NULL;
  }
  cJSON *root = cJSON_ParseWithLength(schema, len);
  if (!root) return base_status_make(RX_ERR_INVALID, "json schema: malformed JSON");
  compiler c = {g, root, {NULL, NULL}, NULL, 0};
  rx_status s = NULL;
  if (cJSON_IsObject(root)) {
    c.defs[0] = cJSON_GetObjectItemCaseSensitive(root, "$defs");
    c.defs[1] = cJSON_GetObjectItemCaseSensitive(root, "definitions");
    for (int k = 0; k < 2 && !s; k++)
      if (c.defs[k] && !cJSON_IsObject(c.defs[k]))
        s = bad("schema", "'%s' must be an object of schemas", k ? "definitions" : "$defs");
  }
  if (!s) {
    size_t nd = 0;
    for (int k = 0; k < 2; k++) nd += c.defs[k] ? (size_t)cJSON_GetArraySize(c.defs[k]) : 0;
    c.nrefs = nd + 1;
    c.refs = calloc(c.nrefs, sizeof *c.refs);
    if (!c.refs) s = base_status_make(RX_ERR_OUT_OF_MEMORY, "json schema: out of memory");
    size_t at = 0;
    for (int k = 0; k < 2 && c.refs; k++)
      for (const cJSON *d = c.defs[k] ? c.defs[k]->child : NULL; d; d = d->next)
        c.refs[at++] = (gdef){d, -1, -1};
    if (c.refs) c.refs[nd] = (gdef){root, -1, -1};
  }
  if (!s) {
    /* the root through its $ref entry, so that "#" inside it names the root's node */
    gdef *r = &c.refs[c.nrefs - 1];
    r->node = -2;
    r->slot = new_node(g, G_ANY);
    int32_t body = -1;
    s = compile(&c, root, "schema", 0, &body);
    if (!s && body == r->slot) s = bad("schema", "the schema refers to itself");
    if (!s) {
      g->nodes[r->slot] = g->nodes[body];
      g->root = r->slot;
    }
  }
  free(c.refs);
  cJSON_Delete(root);
  return s;
}
