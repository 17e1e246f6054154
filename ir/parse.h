/* ir/parse.h: the lexer of the text format, shared by ir/lexer.c and the parser, and the
 * parser's state and helpers, shared by ir/parser.c and ir/parse_tensor.c (private to ir/). The
 * whole source is tokenized up front; the parser walks the token array. */
#ifndef RX_IR_PARSE_H
#define RX_IR_PARSE_H

#include "ir.h"

#include <setjmp.h>
#include <string.h>

typedef enum rx_tok_kind {
  RX_TOK_EOF,    /* end of the source (always the last token) */
  RX_TOK_IDENT,  /* names and keywords; `threadIdx.x`-style dotted names are one token */
  RX_TOK_INT,    /* integer literal: u holds the magnitude, overflow set above 2^63 */
  RX_TOK_FLOAT,  /* float literal (also `inf`, `nan`): f */
  RX_TOK_STRING, /* "...": s holds the unescaped text (arena) */
  RX_TOK_ERROR,  /* a lexical error: s holds the message, reported when the parser reaches it */
  /* punctuation */
  RX_TOK_LPAREN,     /* ( */
  RX_TOK_RPAREN,     /* ) */
  RX_TOK_LBRACKET,   /* [ */
  RX_TOK_RBRACKET,   /* ] */
  RX_TOK_LBRACE,     /* { */
  RX_TOK_RBRACE,     /* } */
  RX_TOK_COMMA,      /* , */
  RX_TOK_COLON,      /* : */
  RX_TOK_SEMI,       /* ; */
  RX_TOK_DOT,        /* . */
  RX_TOK_DOTDOT,     /* .. */
  RX_TOK_ELLIPSIS,   /* ... */
  RX_TOK_ARROW,      /* -> */
  RX_TOK_ASSIGN,     /* = */
  RX_TOK_EQ,         /* == */
  RX_TOK_NE,         /* != */
  RX_TOK_LT,         /* < */
  RX_TOK_LE,         /* <= */
  RX_TOK_GT,         /* > */
  RX_TOK_GE,         /* >= */
  RX_TOK_PLUS,       /* + */
  RX_TOK_MINUS,      /* - */
  RX_TOK_STAR,       /* * */
  RX_TOK_SLASH,      /* / */
  RX_TOK_SLASHSLASH, /* // */
  RX_TOK_PERCENT,    /* % */
  RX_TOK_ANDAND,     /* && */
  RX_TOK_OROR,       /* || */
  RX_TOK_BANG,       /* ! */
  RX_TOK_AT,         /* @ (a distributed tensor's placement) */
} rx_tok_kind;

typedef struct rx_tok {
  rx_tok_kind kind;
  rx_loc loc;    /* first character */
  uint32_t len;  /* bytes of source text */
  bool nl;       /* a newline separates this token from the previous one */
  bool overflow; /* INT: magnitude above 2^63 (does not fit even negated) */
  uint64_t u;    /* INT magnitude */
  double f;      /* FLOAT */
  const char *s; /* STRING contents, ERROR message */
} rx_tok;

/* Tokenizes src into an arena array ending with RX_TOK_EOF. A lexical error becomes an
 * RX_TOK_ERROR token (the parser reports it where it meets it) and lexing goes on, so the items
 * before and after it still parse. Returns false only when nothing could be tokenized. */
bool ir_lex(rx_module *m, const rx_source *src, rx_diag *diag, rx_tok **out_toks, int *out_n);

/* Human-readable text of a token for messages: "'foo'", "end of file". Arena string. */
const char *ir_tok_describe(rx_module *m, const rx_tok *t);

/* ------------------------------------------------------------------------------------------
 * the parser: ir/parser.c parses items, graph functions, literals, dtypes, symbolic
 * expressions and struct info; ir/parse_tensor.c tensor programs and extern declarations.
 * Errors longjmp back to the item loop (ir/parser.c, the comment at its top).
 * ------------------------------------------------------------------------------------------ */
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
    if ((v)->n == (v)->cap)                                                                        \
      (v)->d = ir_parse_grow((p), (v)->d, (v)->n, &(v)->cap, sizeof *(v)->d);                      \
    (v)->d[(v)->n++] = (x);                                                                        \
  } while (0)

/* A name visible in a tensor program: a let-local or a buffer. */
typedef struct tname {
  const char *name;
  rx_local *local;
  rx_buffer *buf;
} tname;

/* The parser's state, P for short: every parse function takes it first. */
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

/* ---- ir/parser.c ---- */
void *ir_parse_grow(P *p, void *old, int n, int *cap, size_t size); /* APUSH's reallocation */
/* Reports an error at loc and abandons the item being parsed. */
_Noreturn void ir_parse_fail_at(P *p, rx_loc loc, const char *fmt, ...) RX_PRINTF(3, 4);
/* "expected WHAT, found ..." where the missing token belongs. */
_Noreturn void ir_parse_fail_expected(P *p, const char *what);
void ir_parse_expect(P *p, rx_tok_kind k, const char *what); /* the token k, or fails */
void ir_parse_enter(P *p); /* one nesting level deeper (at most MAX_DEPTH); leave: back */
/* A binding or statement ends at ';', '}', a newline or the end of the file. */
void ir_parse_end_stmt(P *p, const char *after);
const char *ir_parse_def_name(P *p, const char *what); /* a name being defined (not a keyword) */
bool ir_parse_is_keyword(const rx_tok *t);
int64_t ir_parse_int_value(P *p, const rx_tok *t, bool negative); /* of an INT token */
int64_t ir_parse_int_lit(P *p, const char *what); /* an integer literal, optionally negative */
rx_dtype ir_parse_dtype_of(P *p, const rx_tok *t, bool *ok); /* the dtype a token names */
rx_dtype ir_parse_dtype(P *p, bool allow_any);
/* The comparison a token is (ek, bo: its symbolic and tensor-program operator), if any. */
bool ir_parse_cmp_tok(rx_tok_kind k, rx_expr_kind *ek, rx_binop *bo);
const rx_expr *ir_parse_sym(P *p); /* a symbolic expression */
/* `[e, e, ...]` after the '[' was consumed; returns the count. */
int ir_parse_sym_list(P *p, const rx_expr ***out, rx_tok_kind close, const char *what);
int ir_parse_facts(P *p, const rx_expr ***out, rx_loc **locs); /* `where FACT, FACT` (optional) */
const rx_sinfo *ir_parse_sinfo(P *p);                          /* struct info */
/* Between arguments: ',' (consumed; returns false) or ')' (consumed; returns true). */
bool ir_parse_arg_sep(P *p);

/* ---- ir/parse_tensor.c: the items `tensor_fn NAME(...) {...}` and `[impure] extern_fn
 * NAME(...) [-> SINFO]`, after their keywords ---- */
void ir_parse_tensor_fn(P *p, rx_loc loc);
void ir_parse_extern_fn(P *p, rx_loc loc, bool impure);

/* ---- the token cursor ---- */
/* The current token; a lexical error is reported as soon as the parser looks at it. */
static inline rx_tok *cur(P *p) {
  rx_tok *t = &p->t[p->i];
  if (t->kind == RX_TOK_ERROR) ir_parse_fail_at(p, t->loc, "%s", t->s);
  return t;
}
static inline rx_tok *ahead(P *p, int k) { return &p->t[p->i + k < p->n ? p->i + k : p->n - 1]; }
static inline void next(P *p) {
  if (p->t[p->i].kind != RX_TOK_EOF) p->i++;
}
static inline bool is(P *p, rx_tok_kind k) { return cur(p)->kind == k; }
static inline bool tok_is_kw(const rx_tok *t, const char *kw) {
  size_t n = strlen(kw);
  return t->kind == RX_TOK_IDENT && t->len == n &&
         memcmp(t->loc.src->text + t->loc.offset, kw, n) == 0;
}
static inline bool is_kw(P *p, const char *kw) { return tok_is_kw(cur(p), kw); }
static inline bool accept(P *p, rx_tok_kind k) {
  if (!is(p, k)) return false;
  next(p);
  return true;
}
static inline bool accept_kw(P *p, const char *kw) {
  if (!is_kw(p, kw)) return false;
  next(p);
  return true;
}
static inline const char *tok_text(P *p, const rx_tok *t) {
  return ir_module_intern(p->m, t->loc.src->text + t->loc.offset, t->len);
}
static inline void leave(P *p) { p->depth--; }
/* A binary operator continues the expression unless it starts a new line outside brackets. */
static inline bool op_here(P *p) { return !cur(p)->nl || p->nest > 0; }

#endif
