/* runtime/llm/jinja.h: the chat-template engine's inside (a Jinja subset), shared by its files.
 * Internal header.
 *
 *   jinja_parse.c  the lexer (whitespace control, trim_blocks and lstrip_blocks as transformers
 *                  sets them) and the parser to a tree of jj_node nodes
 *   jinja_eval.c   values, scopes and the evaluator; the public rx_chat_template_* functions
 *   jinja_lib.c    filters, tests, string/dict methods, globals, Python-like printing and JSON
 *
 * The runtime renders an artifact's chat template at serve time, so the engine lives here (it
 * includes only base/ and cJSON). Every node, value and string of one render lives in one arena
 * that dies with the render; limits on depth, steps, memory and output keep any template (a fuzzed
 * one too) from running away. Errors name the template line and column. */
#ifndef RX_LLM_JINJA_H
#define RX_LLM_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "relaxc/llm.h"

/* Limits with their reasons: nesting past this is no real template (the deepest real ones nest
 * about 8 levels); a render's steps, memory and output bound what a hostile template can cost. */
#define JJ_MAX_DEPTH  200                 /* parser and evaluator recursion */
#define JJ_MAX_STEPS  5000000             /* node evaluations per render */
#define JJ_MAX_MEMORY ((size_t)256 << 20) /* arena bytes per render */
#define JJ_MAX_OUTPUT ((size_t)64 << 20)  /* rendered bytes */

/* ---- tree ---- */
typedef enum jn_kind {
  /* statements */
  JN_TEXT,     /* literal text: name */
  JN_OUTPUT,   /* {{ a }} */
  JN_IF,       /* if a: body, else: body2 (an elif is an IF alone in body2) */
  JN_FOR,      /* for names in a [if b]: body, else: body2; c: recursive unused */
  JN_SET,      /* set names = a; set name.name2 = a (namespace attribute) */
  JN_SETBLOCK, /* set name %} body {% endset */
  JN_MACRO,    /* macro name(names = args defaults): body */
  JN_BREAK,
  JN_CONTINUE,
  JN_BLOCK, /* a body that renders as is (generation) */
  /* expressions */
  JN_CONST,   /* value */
  JN_NAME,    /* name */
  JN_LIST,    /* [args] */
  JN_TUPLE,   /* (args) */
  JN_DICT,    /* {args[0]: args[1], ...} */
  JN_ATTR,    /* a.name */
  JN_ITEM,    /* a[b] */
  JN_SLICE,   /* a[b:c:d], each of b c d may be NULL */
  JN_CALL,    /* a(args, names = body2) */
  JN_FILTER,  /* a | name(args, names = body2) */
  JN_TEST,    /* a is [not] name(args) */
  JN_BINOP,   /* a op b */
  JN_NEG,     /* -a */
  JN_POS,     /* +a */
  JN_NOT,     /* not a */
  JN_AND,     /* a and b */
  JN_OR,      /* a or b */
  JN_COND,    /* a if b else c (c NULL: undefined) */
  JN_COMPARE, /* a ops[i] args[i] ... */
} jn_kind;

/* binary and comparison operators */
typedef enum jj_op {
  JJ_ADD,
  JJ_SUB,
  JJ_MUL,
  JJ_DIV,
  JJ_FLOORDIV,
  JJ_MOD,
  JJ_POW,
  JJ_CONCAT,
  JJ_EQ,
  JJ_NE,
  JJ_LT,
  JJ_LE,
  JJ_GT,
  JJ_GE,
  JJ_IN,
  JJ_NOTIN,
} jj_op;

typedef struct jj_node jj_node;
typedef struct jn_list {
  jj_node **v;
  size_t n, cap;
} jn_list;

struct jj_node {
  jn_kind kind;
  int line, col;
  int op;                 /* BINOP: jj_op */
  bool neg;               /* TEST: `is not` */
  const char *name;       /* TEXT (with len), NAME, ATTR, FILTER, TEST, MACRO, SET's target */
  size_t len;             /* TEXT */
  const char *name2;      /* SET ns.attr: the attribute */
  struct jv *value;       /* CONST */
  jj_node *a, *b, *c, *d; /* operands (see the kinds) */
  jn_list args;           /* arguments, elements, the body of a statement */
  jn_list body2;          /* else body; keyword argument values; macro defaults */
  const char **names;     /* keyword argument names, for/set targets, macro parameters */
  size_t nnames;          /* COMPARE: ops is in ops */
  int *ops;               /* COMPARE: one jj_op per args[i] */
};

/* A parsed template: its tree, in its own arena. */
struct rx_chat_template {
  rx_arena arena;
  const char *name; /* for errors: "chat_template" */
  jn_list body;
  const char *bos, *eos; /* bos_token and eos_token given to every render ("" when none) */
};

/* Parses text (len bytes) into t (arena and name set); on error, an RX_ERR_INVALID status that
 * names the line and column. */
rx_status jj_parse(rx_chat_template *t, const char *text, size_t len);

/* ---- values ---- */
typedef enum jv_kind {
  JV_UNDEF, /* s: the name that was looked up (for errors) */
  JV_NONE,
  JV_BOOL,
  JV_INT,
  JV_FLOAT,
  JV_STR,
  JV_LIST,  /* also tuples (tuple set) */
  JV_DICT,  /* keys and items; namespace() too (ns set) */
  JV_MACRO, /* macro: its node */
  JV_FUNC,  /* a global function or a method bound to self: fn */
} jv_kind;

typedef struct jv jv;
typedef struct jj_ctx jj_ctx;
/* a builtin: args (n), keyword names/values (nk); returns NULL after jj_fail */
typedef jv *(*jj_fn)(jj_ctx *c, jv *self, jv **args, size_t n, const char **kn, jv **kv, size_t nk);

struct jv {
  jv_kind kind;
  bool b, tuple, ns;
  int64_t i;
  double f;
  const char *s; /* STR: UTF-8 bytes (n), NUL-terminated */
  size_t n;
  jv **items; /* LIST items; DICT values */
  jv **keys;  /* DICT keys */
  size_t len, cap;
  const jj_node *macro;
  jj_fn fn;
  jv *self;
  const char *fname; /* FUNC: its name */
};

typedef struct jj_scope jj_scope;

struct jj_ctx {
  rx_arena arena;
  size_t mem;
  const rx_chat_template *t;
  rx_strbuf *out;
  jj_scope *scope, *root;
  int depth;
  size_t steps;
  int line, col; /* the node being evaluated, for errors */
  bool failed;
  char err[512];
  int brk;     /* 1: break, 2: continue pending */
  int64_t now; /* strftime_now's time: seconds since 1970 (UTC); 0: the clock's (local time) */
};

/* Records the first error (with the template's name and the current line and column); returns
 * NULL so that callers may `return jj_fail(...)`. */
jv *jj_fail(jj_ctx *c, const char *fmt, ...) RX_PRINTF(2, 3);
void *jj_alloc(jj_ctx *c, size_t n); /* NULL after jj_fail when past the memory limit */

/* constructors (NULL after a failure) */
jv *jj_undef(jj_ctx *c, const char *name);
jv *jj_none(jj_ctx *c);
jv *jj_bool(jj_ctx *c, bool b);
jv *jj_int(jj_ctx *c, int64_t i);
jv *jj_float(jj_ctx *c, double f);
jv *jj_str(jj_ctx *c, const char *s, size_t n);
jv *jj_list(jj_ctx *c);
jv *jj_dict(jj_ctx *c);
jv *jj_func(jj_ctx *c, const char *name, jj_fn fn, jv *self);
bool jj_push(jj_ctx *c, jv *list, jv *x);
bool jj_dict_set(jj_ctx *c, jv *d, jv *key, jv *x);
jv *jj_dict_get(const jv *d, const char *key, size_t n); /* NULL when absent */
jv *jj_from_json(jj_ctx *c, const void *cjson);          /* a cJSON item */

/* semantics */
bool jj_truthy(const jv *v);
bool jj_equal(const jv *a, const jv *b);
/* str(v) appended to out: strings as they are, others as Python prints them */
bool jj_str_of(jj_ctx *c, const jv *v, rx_strbuf *out);
bool jj_repr(jj_ctx *c, const jv *v, rx_strbuf *out);
jv *jj_to_string(jj_ctx *c, const jv *v);
/* json.dumps(v, ensure_ascii=False, indent=indent (<0: none), sort_keys) */
bool jj_json(jj_ctx *c, const jv *v, int indent, bool sort_keys, int level, rx_strbuf *out);
/* Iteration: a list's items, a dict's keys, a string's characters; NULL + jj_fail otherwise */
jv *jj_iter_list(jj_ctx *c, jv *v);
size_t jj_utf8_len(const char *s, size_t n);
const char *jj_kind_name(const jv *v);

/* a value's attribute (obj.name): dict key, then a method; undefined when absent */
jv *jj_getattr(jj_ctx *c, jv *obj, const char *name);
/* calls: a filter, a test, a global by name */
jv *jj_filter(jj_ctx *c, const char *name, jv *x, jv **args, size_t n, const char **kn, jv **kv,
              size_t nk);
int jj_test(jj_ctx *c, const char *name, jv *x, jv **args, size_t n); /* -1: failed */
jv *jj_global(jj_ctx *c, const char *name);                           /* NULL: none */
/* Calls a callable (a macro or a builtin) */
jv *jj_call(jj_ctx *c, jv *f, jv **args, size_t n, const char **kn, jv **kv, size_t nk);

#endif
