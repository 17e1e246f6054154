/* ir/parse.h: the lexer of the text format, shared by ir/lexer.c and ir/parser.c (private to
 * ir/). The whole source is tokenized up front; the parser walks the token array. */
#ifndef RX_IR_PARSE_H
#define RX_IR_PARSE_H

#include "ir.h"

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
bool rx_lex(rx_module *m, const rx_source *src, rx_diag *diag, rx_tok **out_toks, int *out_n);

/* Human-readable text of a token for messages: "'foo'", "end of file". Arena string. */
const char *rx_tok_describe(rx_module *m, const rx_tok *t);

#endif
