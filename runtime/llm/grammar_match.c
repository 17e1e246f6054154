/* runtime/llm/grammar_match.c: a compiled schema (grammar.h's nodes) run as a byte-level pushdown
 * automaton. Each byte goes to the top frame of each stack; a frame consumes it, refuses it, or
 * hands it on: to a child it pushes (the value after a colon) or, when the frame is whole and the
 * byte is not its own (a number's end), to its parent after popping itself. An anyOf frame forks
 * the stack, one copy per alternative; copies that refuse a byte die, equal ones merge.
 *
 * The text accepted is JSON with limited whitespace, so that a generation always ends: an
 * optional space before the value, and after each ':' and ',' at most one space; no other
 * whitespace. Object properties come in the schema's order (each optional one may be left out);
 * numbers have at most G_MAX_INT_DIGITS, G_MAX_FRAC_DIGITS and G_MAX_EXP_DIGITS digits per part;
 * strings are UTF-8 (well-formed, as Unicode's table 3-7 has it), without raw control
 * characters, with JSON's escapes (a \u escape of a surrogate is refused: the length a
 * validator counts for a pair is not the number of escapes). */
#include "runtime/llm/grammar.h"

#include <string.h>

enum { R_START, R_END };                                                      /* the root */
enum { O_OPEN, O_FIRST, O_KEY, O_COLON, O_VALUE, O_AFTER, O_COMMA };          /* objects */
enum { A_OPEN, A_FIRST, A_AFTER, A_COMMA };                                   /* arrays */
enum { S_OPEN, S_BODY, S_ESC, S_HEX, S_UTF8 };                                /* strings */
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP }; /* numbers */

typedef enum step { DONE, REJECT, AGAIN } step; /* consumed; refused; hand the byte on */

enum { UTF8_ANY_CONT = 0x80BF }; /* the range of a continuation byte, lo << 8 | hi */
enum { MAX_FORKS = 8 };          /* anyOf inside anyOf with no byte between: how deep to fork */

static gframe frame_of(int32_t node) {
  gframe f;
  memset(&f, 0, sizeof f);
  f.node = node;
  return f;
}

static bool push(gstack *s, int32_t node) {
  if (s->depth == G_MAX_DEPTH) return false;
  s->f[s->depth++] = frame_of(node);
  return true;
}

static bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
static bool is_hex(uint8_t c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A counter that saturates at cap (past it, the count no longer changes what may come, and
 * equal states stay equal for the mask cache). */
static uint32_t bump(uint32_t a, int64_t cap) { return (int64_t)a < cap ? a + 1 : a; }
static int64_t count_cap(const gnode *n) { return n->max >= 0 ? n->max : n->min; }

/* ---- objects ---- */
static void start_key(const gnode *n, gframe *f, uint32_t lo) {
  uint32_t hi = n->next_req[lo] < n->nprops ? n->next_req[lo] : n->nprops - 1;
  f->phase = O_KEY;
  f->a = lo;
  f->b = 0;
  f->aux = (uint16_t)hi;
  f->sub = 0;
}

/* The key bytes so far (f->b of candidate f->a) then c; ends at the closing quote. */
static step key_byte(const gnode *n, gframe *f, uint8_t c) {
  const gtext *cur = &n->props[f->a].key;
  for (uint32_t j = f->a; j <= f->aux; j++) {
    const gtext *k = &n->props[j].key;
    if (k->n < f->b || memcmp(k->s, cur->s, f->b) != 0) continue;
    if (k->n > f->b && (uint8_t)k->s[f->b] == c) { /* an escaped quote too: never a key's end */
      f->a = j;
      f->b++;
      return DONE;
    }
    if (c == '"' && k->n == f->b) {
      f->a = j;
      f->b = 0;
      f->aux = 0;
      f->phase = O_COLON;
      return DONE;
    }
  }
  return REJECT;
}

static step object_byte(const grammar *g, gstack *s, const gnode *n, uint8_t c) {
  gframe *f = &s->f[s->depth - 1];
  switch (f->phase) {
  case O_OPEN:
    if (c != '{') return REJECT;
    f->phase = O_FIRST;
    return DONE;
  case O_FIRST:
  case O_COMMA:
    if (c == ' ' && f->phase == O_COMMA && !f->sub) {
      f->sub = 1;
      return DONE;
    }
    if (c == '}' && f->phase == O_FIRST && (n->open || n->next_req[0] == n->nprops)) {
      s->depth--;
      return DONE;
    }
    if (c != '"') return REJECT;
    if (n->open) {
      f->phase = O_COLON;
      f->sub = 0;
      if (!push(s, G_NODE_ANY_STRING)) return REJECT;
      s->f[s->depth - 1].phase = S_BODY; /* the quote is taken */
      return DONE;
    }
    if (f->a >= n->nprops) return REJECT;
    start_key(n, f, f->a);
    return DONE;
  case O_KEY:
    return key_byte(n, f, c);
  case O_COLON:
    if (c != ':') return REJECT;
    f->phase = O_VALUE;
    return DONE;
  case O_VALUE:
    if (c == ' ' && !f->sub) {
      f->sub = 1;
      return DONE;
    }
    f->phase = O_AFTER;
    f->sub = 0;
    return push(s, n->open ? G_NODE_ANY : n->props[f->a].node) ? AGAIN : REJECT;
  case O_AFTER:
    if (c == ',' && (n->open || f->a + 1 < n->nprops)) {
      f->phase = O_COMMA;
      f->a = n->open ? 0 : f->a + 1;
      return DONE;
    }
    if (c == '}' && (n->open || n->next_req[f->a + 1] == n->nprops)) {
      s->depth--;
      return DONE;
    }
    return REJECT;
  }
  (void)g;
  return REJECT;
}

/* ---- arrays ---- */
static step array_byte(gstack *s, const gnode *n, uint8_t c) {
  gframe *f = &s->f[s->depth - 1];
  switch (f->phase) {
  case A_OPEN:
    if (c != '[') return REJECT;
    f->phase = A_FIRST;
    return DONE;
  case A_FIRST:
    if (c == ']' && n->min == 0) {
      s->depth--;
      return DONE;
    }
    if (n->max == 0) return REJECT;
    f->a = bump(0, count_cap(n));
    f->phase = A_AFTER;
    return push(s, n->items) ? AGAIN : REJECT;
  case A_AFTER:
    if (c == ',' && (n->max < 0 || f->a < n->max)) {
      f->phase = A_COMMA;
      return DONE;
    }
    if (c == ']' && f->a >= n->min) {
      s->depth--;
      return DONE;
    }
    return REJECT;
  case A_COMMA:
    if (c == ' ' && !f->sub) {
      f->sub = 1;
      return DONE;
    }
    f->sub = 0;
    f->a = bump(f->a, count_cap(n));
    f->phase = A_AFTER;
    return push(s, n->items) ? AGAIN : REJECT;
  }
  return REJECT;
}

/* ---- strings ---- */
/* A UTF-8 lead byte: how many continuation bytes follow and the first one's range (Unicode's
 * table 3-7: no overlong forms, no surrogates, nothing past U+10FFFF). */
static bool utf8_lead(uint8_t c, uint8_t *more, uint16_t *range) {
  *range = UTF8_ANY_CONT;
  if (c >= 0xC2 && c <= 0xDF)
    *more = 1;
  else if (c >= 0xE0 && c <= 0xEF)
    *more = 2, *range = c == 0xE0 ? 0xA0BF : c == 0xED ? 0x809F : UTF8_ANY_CONT;
  else if (c >= 0xF0 && c <= 0xF4)
    *more = 3, *range = c == 0xF0 ? 0x90BF : c == 0xF4 ? 0x808F : UTF8_ANY_CONT;
  else
    return false;
  return true;
}

static step string_byte(gstack *s, const gnode *n, uint8_t c) {
  gframe *f = &s->f[s->depth - 1];
  switch (f->phase) {
  case S_OPEN:
    if (c != '"') return REJECT;
    f->phase = S_BODY;
    return DONE;
  case S_BODY:
    if (c == '"') {
      if (f->a < n->min) return REJECT;
      s->depth--;
      return DONE;
    }
    if (n->max >= 0 && f->a >= n->max) return REJECT; /* no room for another character */
    if (c < 0x20) return REJECT;
    if (c >= 0x80 && !utf8_lead(c, &f->sub, &f->aux)) return REJECT;
    f->phase = c == '\\' ? S_ESC : c >= 0x80 ? S_UTF8 : S_BODY;
    f->a = bump(f->a, count_cap(n));
    return DONE;
  case S_UTF8:
    if (c < (f->aux >> 8) || c > (f->aux & 0xFF)) return REJECT;
    f->aux = --f->sub ? UTF8_ANY_CONT : 0;
    if (!f->sub) f->phase = S_BODY;
    return DONE;
  case S_ESC:
    if (c == 'u') {
      f->phase = S_HEX;
      return DONE;
    }
    if (!strchr("\"\\/bfnrt", c) || !c) return REJECT;
    f->phase = S_BODY;
    return DONE;
  case S_HEX:
    if (!is_hex(c)) return REJECT;
    if (f->sub == 0)
      f->aux = c == 'd' || c == 'D';
    else if (f->sub == 1 && f->aux && c > '7')
      return REJECT; /* \uD800..\uDFFF */
    else
      f->aux = 0;
    if (++f->sub == 4) {
      f->sub = 0;
      f->aux = 0;
      f->phase = S_BODY;
    }
    return DONE;
  }
  return REJECT;
}

/* ---- numbers ---- */
static bool number_whole(uint8_t phase) {
  return phase == N_ZERO || phase == N_INT || phase == N_FRAC || phase == N_EXP;
}

static step number_byte(gstack *s, const gnode *n, uint8_t c) {
  gframe *f = &s->f[s->depth - 1];
  bool real = n->kind == G_NUMBER;
  uint8_t p = f->phase;
  if ((p == N_START || p == N_MINUS) && is_digit(c)) {
    f->phase = c == '0' ? N_ZERO : N_INT;
    f->a = c != '0';
    return DONE;
  }
  if (p == N_START && c == '-') {
    f->phase = N_MINUS;
    return DONE;
  }
  if (p == N_INT && is_digit(c) && f->a < G_MAX_INT_DIGITS) {
    f->a++;
    return DONE;
  }
  if ((p == N_ZERO || p == N_INT) && c == '.' && real) {
    f->phase = N_DOT;
    f->a = 0;
    return DONE;
  }
  if ((p == N_DOT && is_digit(c)) || (p == N_FRAC && is_digit(c) && f->a < G_MAX_FRAC_DIGITS)) {
    f->phase = N_FRAC;
    f->a++;
    return DONE;
  }
  if ((p == N_ZERO || p == N_INT || p == N_FRAC) && (c == 'e' || c == 'E') && real) {
    f->phase = N_E;
    f->a = 0;
    return DONE;
  }
  if (p == N_E && (c == '+' || c == '-')) {
    f->phase = N_ESIGN;
    return DONE;
  }
  if (((p == N_E || p == N_ESIGN) && is_digit(c)) ||
      (p == N_EXP && is_digit(c) && f->a < G_MAX_EXP_DIGITS)) {
    f->phase = N_EXP;
    f->a++;
    return DONE;
  }
  if (!number_whole(p)) return REJECT;
  s->depth--; /* the number ended before c: c is the parent's */
  return AGAIN;
}

/* ---- literals ---- */
static bool lit_prefix(const gnode *n, uint32_t j, uint32_t a, uint32_t b) {
  return n->lits[j].n >= b && memcmp(n->lits[j].s, n->lits[a].s, b) == 0;
}

/* Whether the b bytes matched (of candidate a) are a whole literal. */
static bool lit_whole(const gnode *n, uint32_t a, uint32_t b) {
  for (uint32_t j = a; b && j < n->nlits; j++)
    if (n->lits[j].n == b && lit_prefix(n, j, a, b)) return true;
  return false;
}

static step literal_byte(gstack *s, const gnode *n, uint8_t c) {
  gframe *f = &s->f[s->depth - 1];
  for (uint32_t j = f->a; j < n->nlits; j++) {
    if (n->lits[j].n <= f->b || (uint8_t)n->lits[j].s[f->b] != c || !lit_prefix(n, j, f->a, f->b))
      continue;
    f->a = j;
    f->b++;
    bool longer = false; /* could a longer literal still follow? */
    for (uint32_t k = j; k < n->nlits && !longer; k++)
      longer = n->lits[k].n > f->b && lit_prefix(n, k, j, f->b);
    if (!longer) s->depth--;
    return DONE;
  }
  if (!lit_whole(n, f->a, f->b)) return REJECT;
  s->depth--;
  return AGAIN;
}

/* ---- the stack machine ---- */
static void add_stack(gstate *out, const gstack *s) {
  for (uint32_t i = 0; i < out->n; i++)
    if (out->s[i].depth == s->depth && !memcmp(out->s[i].f, s->f, s->depth * sizeof(gframe)))
      return;
  if (out->n == G_MAX_ALTS) return; /* dropped: only narrows what may come */
  gstack *d = &out->s[out->n++];
  d->depth = s->depth;
  memcpy(d->f, s->f, s->depth * sizeof(gframe));
}

static step any_byte(gstack *s, uint8_t c) {
  gframe *f = &s->f[s->depth - 1];
  int32_t to = c == '{'                           ? G_NODE_ANY_OBJECT
               : c == '['                         ? G_NODE_ANY_ARRAY
               : c == '"'                         ? G_NODE_ANY_STRING
               : c == '-' || is_digit(c)          ? G_NODE_ANY_NUMBER
               : c == 't' || c == 'f' || c == 'n' ? G_NODE_ANY_LITERAL
                                                  : -1;
  if (to < 0) return REJECT;
  *f = frame_of(to);
  return AGAIN;
}

static void feed_stack(const grammar *g, gstack *s, uint8_t c, gstate *out, int forks) {
  for (;;) {
    if (!s->depth) return;
    gframe *f = &s->f[s->depth - 1];
    step r = REJECT;
    if (f->node < 0) { /* the root */
      if (f->phase != R_START) return;
      if (c == ' ' && !f->sub) {
        f->sub = 1;
        r = DONE;
      } else {
        f->phase = R_END;
        f->sub = 0;
        r = push(s, g->root) ? AGAIN : REJECT;
      }
    } else {
      const gnode *n = &g->nodes[f->node];
      switch (n->kind) {
      case G_ANYOF:
        if (forks >= MAX_FORKS) return;
        for (uint32_t i = 0; i < n->nalts; i++) {
          gstack copy;
          copy.depth = s->depth;
          memcpy(copy.f, s->f, s->depth * sizeof(gframe));
          copy.f[copy.depth - 1] = frame_of(n->alts[i]);
          feed_stack(g, &copy, c, out, forks + 1);
        }
        return;
      case G_ANY:
        r = any_byte(s, c);
        break;
      case G_OBJECT:
        r = object_byte(g, s, n, c);
        break;
      case G_ARRAY:
        r = array_byte(s, n, c);
        break;
      case G_STRING:
        r = string_byte(s, n, c);
        break;
      case G_NUMBER:
      case G_INTEGER:
        r = number_byte(s, n, c);
        break;
      case G_LITERALS:
        r = literal_byte(s, n, c);
        break;
      case G_ROOT:
        RX_ASSERT(!"a root node below the root");
      }
    }
    if (r == REJECT) return;
    if (r == DONE) {
      add_stack(out, s);
      return;
    }
  }
}

void llm_gstate_init(const grammar *g, gstate *st) {
  (void)g;
  st->n = 1;
  st->s[0].depth = 1;
  st->s[0].f[0] = frame_of(-1);
}

void llm_gstate_feed(const grammar *g, const gstate *in, uint8_t c, gstate *out) {
  out->n = 0;
  for (uint32_t i = 0; i < in->n; i++) {
    gstack s;
    s.depth = in->s[i].depth;
    memcpy(s.f, in->s[i].f, s.depth * sizeof(gframe));
    feed_stack(g, &s, c, out, 0);
  }
}

static bool stack_accepting(const grammar *g, const gstack *s) {
  if (s->depth == 1) return s->f[0].phase == R_END;
  if (s->depth != 2 || s->f[0].phase != R_END) return false;
  const gframe *f = &s->f[1];
  const gnode *n = &g->nodes[f->node];
  if (n->kind == G_NUMBER || n->kind == G_INTEGER) return number_whole(f->phase);
  if (n->kind == G_LITERALS) return lit_whole(n, f->a, f->b);
  return false;
}

bool llm_gstate_accepting(const grammar *g, const gstate *st) {
  for (uint32_t i = 0; i < st->n; i++)
    if (stack_accepting(g, &st->s[i])) return true;
  return false;
}

bool llm_gstate_string_room(const grammar *g, const gstate *st, int64_t *room) {
  *room = -1;
  for (uint32_t i = 0; i < st->n; i++) {
    const gframe *f = &st->s[i].f[st->s[i].depth - 1];
    if (f->node < 0 || g->nodes[f->node].kind != G_STRING || f->phase != S_BODY) return false;
    const gnode *n = &g->nodes[f->node];
    int64_t r = n->max < 0 ? INT64_MAX : n->max - (int64_t)f->a;
    if (r > *room) *room = r;
  }
  return st->n > 0;
}

size_t llm_gstate_key(const gstate *st, uint8_t *out, size_t cap) {
  size_t n = 0;
  RX_ASSERT(cap >= sizeof st->n);
  memcpy(out, &st->n, sizeof st->n);
  n += sizeof st->n;
  for (uint32_t i = 0; i < st->n; i++) {
    size_t k = sizeof(uint32_t) + st->s[i].depth * sizeof(gframe);
    RX_ASSERT(n + k <= cap);
    memcpy(out + n, &st->s[i], k);
    n += k;
  }
  return n;
}
