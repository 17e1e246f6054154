/* tools/serve/grammars.h: relaxc serve's cache of compiled grammars (structured output), keyed by
 * the schema's text, so that a schema is compiled once however many requests use it. */
#ifndef RX_TOOLS_SERVE_GRAMMARS_H
#define RX_TOOLS_SERVE_GRAMMARS_H
#include "relaxc/llm.h"

#include <stddef.h>

typedef struct serve_grammars serve_grammars;

/* A cache of at most cap grammars for tok (which must outlive it). */
serve_grammars *serve_grammars_new(const rx_tokenizer *tok, size_t cap);
void serve_grammars_free(serve_grammars *c); /* NULL is fine */
/* The grammar of schema (len bytes; NULL: json_object) as a new reference (the caller frees it
 * with rx_llm_grammar_free): the cached one, else compiled and cached (the least recently used
 * one dropped when full; requests that hold it keep it). A schema that does not compile is
 * rx_llm_grammar_compile's error. Thread-safe. */
rx_status serve_grammars_get(serve_grammars *c, const char *schema, size_t len,
                             rx_llm_grammar **out);
#endif
