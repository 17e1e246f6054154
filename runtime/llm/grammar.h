/* runtime/llm/grammar.h: structured output's inside (relaxc/llm.h "constrained decoding"),
 * shared by its files. Internal header.
 *
 *   grammar_schema.c  a JSON schema (or json_object) compiled to the nodes below
 *   grammar_match.c   the nodes run as a byte-level pushdown automaton (gstate, grammar_feed)
 *   grammar_mask.c    the vocabulary's bytes in a trie, token masks (a trie walk per state,
 *                     memoized by state), the public grammar and matcher
 *
 * A state is a set of stacks (more than one only where anyOf or a list of types leaves several
 * readings open); each stack is frames from the root down. A frame is a node and where the
 * automaton is inside it. Every field of a frame that its node and phase do not use is zero, so
 * two equal states have equal bytes: states are compared, deduplicated and used as cache keys
 * with memcmp. */
#ifndef RX_LLM_GRAMMAR_H
#define RX_LLM_GRAMMAR_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "relaxc/llm.h"

/* Limits, each with its reason. */
enum {
  G_MAX_DEPTH = 24,       /* frames on a stack: JSON nested 22 deep below the root (a recursive
                             $ref or json_object's values stop nesting there) */
  G_MAX_ALTS = 8,         /* stacks in a state: the readings anyOf leaves open at once (an anyOf
                             of more alternatives is refused; nested ones past this are dropped,
                             which only narrows what may be generated) */
  G_MAX_INT_DIGITS = 15,  /* digits before the point: every such integer is exact in a double */
  G_MAX_FRAC_DIGITS = 15, /* digits after it */
  G_MAX_EXP_DIGITS = 2,   /* exponent digits: 1e99 at most, never an overflow to infinity */
  G_MAX_NODES = 4096,     /* nodes a schema may compile to (a schema is a request's field) */
  G_MAX_SCHEMA_DEPTH = 64 /* nesting of the schema's JSON the compiler recurses into */
};

typedef enum gkind {
  G_ROOT,     /* the bottom frame: an optional space, the value, then the end */
  G_ANY,      /* any JSON value: becomes one of the generic nodes at its first byte */
  G_OBJECT,   /* properties in order (open: any keys, any values) */
  G_ARRAY,    /* items, minItems, maxItems */
  G_STRING,   /* minLength, maxLength (characters; an escape is one) */
  G_NUMBER,   /* JSON's number, digits bounded */
  G_INTEGER,  /* -?(0|[1-9][0-9]*), bounded */
  G_LITERALS, /* one of fixed texts: enum, const, true/false, null */
  G_ANYOF,    /* one of the alternatives */
} gkind;

typedef struct gtext {
  const char *s;
  uint32_t n;
} gtext;

typedef struct gprop {
  gtext key; /* the name as JSON string content (escaped), without quotes */
  int32_t node;
  bool required;
} gprop;

typedef struct gnode {
  gkind kind;
  bool open;    /* G_OBJECT: any keys and values (json_object; no "properties") */
  gprop *props; /* G_OBJECT */
  uint32_t nprops;
  uint32_t *next_req; /* G_OBJECT: [i]: the first required property at or after i, or nprops */
  int32_t items;      /* G_ARRAY: the items' node */
  int64_t min, max;   /* G_ARRAY: items; G_STRING: characters; max -1: none */
  gtext *lits;        /* G_LITERALS */
  uint32_t nlits;
  int32_t *alts; /* G_ANYOF */
  uint32_t nalts;
} gnode;

/* The nodes every grammar has first (json_object's pieces and G_ANY's targets). */
enum {
  G_NODE_ANY,
  G_NODE_ANY_OBJECT,
  G_NODE_ANY_ARRAY,
  G_NODE_ANY_STRING,
  G_NODE_ANY_NUMBER,
  G_NODE_ANY_LITERAL,
  G_NODE_FIRST_USER
};

typedef struct gframe {
  int32_t node;  /* index into the nodes; -1: the root frame */
  uint8_t phase; /* per kind (grammar_match.c) */
  uint8_t sub;   /* a phase's small counter (spaces, hex digits, UTF-8 bytes to come) */
  uint16_t aux;  /* G_OBJECT: the last property a key may name; G_STRING: the next UTF-8 byte's
                    range (lo << 8 | hi), or a surrogate's first digit seen */
  uint32_t a, b; /* G_OBJECT: property, key bytes matched; G_ARRAY: items so far; G_STRING:
                    characters so far; G_NUMBER: digits of this part; G_LITERALS: candidate,
                    bytes matched */
} gframe;

typedef struct gstack {
  uint32_t depth;
  gframe f[G_MAX_DEPTH];
} gstack;

typedef struct gstate {
  uint32_t n; /* stacks; 0: dead (nothing can follow) */
  gstack s[G_MAX_ALTS];
} gstate;

typedef struct rx_llm_grammar grammar;

/* ---- grammar_schema.c ---- */
/* Compiles schema (len bytes of JSON; NULL: json_object, any JSON object) into g's nodes and
 * root. */
rx_status llm_grammar_build(grammar *g, const char *schema, size_t len);

/* ---- grammar_match.c ---- */
/* The state before any byte. */
void llm_gstate_init(const grammar *g, gstate *st);
/* The state after byte c (out may not be in); out->n 0 when c cannot follow. */
void llm_gstate_feed(const grammar *g, const gstate *in, uint8_t c, gstate *out);
/* Whether the text so far is a whole value (the end may come). */
bool llm_gstate_accepting(const grammar *g, const gstate *st);
/* Whether every stack of st is inside a string's body (between characters, no escape or UTF-8
 * sequence begun); *room: the most characters one of them may still take (INT64_MAX: no bound). */
bool llm_gstate_string_room(const grammar *g, const gstate *st, int64_t *room);
/* The bytes of st that matter (the cache's key): n, then each stack's used frames. */
size_t llm_gstate_key(const gstate *st, uint8_t *out, size_t cap);

/* ---- grammar_mask.c ---- */
struct rx_llm_grammar {
  rx_arena arena; /* nodes, their texts and arrays */
  gnode *nodes;
  uint32_t nnodes, capnodes;
  int32_t root;       /* the root value's node */
  int refs;           /* atomic */
  int32_t vocab;      /* tokens of the tokenizer */
  struct gtrie *trie; /* the vocabulary's bytes, by id and in a trie */
  const int32_t *eos; /* the tokenizer's EOS ids (borrowed from it) */
  size_t neos;
  pthread_mutex_t lock; /* the mask cache */
  struct gcache *cache;
};

/* Masks a row of logits for a request's matcher (batch.c, model.c): each token that cannot
 * follow gets -inf; an EOS id of the model (is_eos) stays when the text so far is a whole value.
 * *out_end: the value is whole and no token but EOS could follow (the request ends here, with
 * finish "stop"). A state from which no token at all is allowed is an RX_ERR_INVALID error. */
rx_status llm_grammar_mask_row(rx_llm_matcher *mt, const rx_llm_model *m, float *logits,
                               int32_t vocab, bool *out_end);
/* Advances the matcher by a sampled token (an EOS id: nothing). */
rx_status llm_grammar_accept_id(rx_llm_matcher *mt, const rx_llm_model *m, int32_t id);

#endif
