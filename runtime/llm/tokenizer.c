/* runtime/llm/tokenizer.c: loading a Hugging Face tokenizer.json (read with cJSON) into the
 * structures of tokenizer.h, and the tokenizer's lookups. Every problem of the file is a status
 * naming the file and the place in it ("llama.json: model.merges[12]: ..."); a kind the runtime
 * does not implement is RX_ERR_UNSUPPORTED, a file that contradicts itself RX_ERR_INVALID. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/llm/tokenizer.h"
#include "runtime/llm/unicode.h"

/* Ids are below this bound: 8 times the largest vocabularies in use (Gemma's 262,144 tokens),
 * and small enough that the id-indexed tables of a hostile file stay a few tens of MB. */
#define TOK_MAX_VOCAB (1 << 21)
/* A place in the file, for messages ("pre_tokenizer.pretokenizers[1].pattern"). */
#define PATH_LEN 192

/* The EOS tokens recognized by name when neither the template nor a config names one, in order:
 * Llama 2 and Mistral, GPT-2 and Qwen2 base, Llama 3 base, Qwen2 chat, Llama 3 chat. */
static const char *const EOS_NAMES[] = {"</s>", "<|endoftext|>", "<|end_of_text|>", "<|im_end|>",
                                        "<|eot_id|>"};

void rx_llm_free(void *p) { free(p); }

typedef struct loader {
  rx_tokenizer *t;
  const char *name;
} loader;

static rx_status fail(const loader *L, rx_status_code code, const char *path, const char *fmt, ...)
    RX_PRINTF(4, 5);
static rx_status fail(const loader *L, rx_status_code code, const char *path, const char *fmt,
                      ...) {
  va_list ap;
  va_start(ap, fmt);
  rx_status s = base_status_vmake(code, fmt, ap);
  va_end(ap);
  return base_status_annotate(s, "%s: %s", L->name, path);
}
#define INVALID(L, path, ...)     fail(L, RX_ERR_INVALID, path, __VA_ARGS__)
#define UNSUPPORTED(L, path, ...) fail(L, RX_ERR_UNSUPPORTED, path, __VA_ARGS__)

/* Writes a place in the file into out (PATH_LEN bytes; a longer one is cut). */
static void place(char *out, const char *fmt, ...) RX_PRINTF(2, 3);
static void place(char *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, PATH_LEN, fmt, ap);
  va_end(ap);
}

/* ---- fields ---- */
static const cJSON *member(const cJSON *obj, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(obj, key);
}
static bool absent(const cJSON *j) { return !j || cJSON_IsNull(j); }

static rx_status get_bool(const loader *L, const cJSON *obj, const char *path, const char *key,
                          bool dflt, bool *out) {
  const cJSON *j = member(obj, key);
  *out = dflt;
  if (absent(j)) return NULL;
  if (!cJSON_IsBool(j)) return INVALID(L, path, "'%s' is not true or false", key);
  *out = cJSON_IsTrue(j);
  return NULL;
}

static tok_text keep(const loader *L, const char *s) {
  size_t n = strlen(s);
  return (tok_text){base_arena_dup(&L->t->arena, s, n + 1), n};
}

/* A string member: *out set when present; required: absence is an error. */
static rx_status get_text(const loader *L, const cJSON *obj, const char *path, const char *key,
                          bool required, tok_text *out) {
  const cJSON *j = member(obj, key);
  *out = (tok_text){NULL, 0};
  if (absent(j)) return required ? INVALID(L, path, "no '%s'", key) : NULL;
  if (!cJSON_IsString(j)) return INVALID(L, path, "'%s' is not a string", key);
  *out = keep(L, j->valuestring);
  return NULL;
}

/* A whole number in [0, max]. */
static rx_status as_count(const loader *L, const cJSON *j, const char *path, double max,
                          int64_t *out) {
  *out = 0;
  if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0) || j->valuedouble > max ||
      j->valuedouble != floor(j->valuedouble))
    return INVALID(L, path, "expected a whole number from 0 to %.0f", max);
  *out = (int64_t)j->valuedouble;
  return NULL;
}

static rx_status get_count(const loader *L, const cJSON *obj, const char *path, const char *key,
                           int64_t dflt, int64_t *out) {
  const cJSON *j = member(obj, key);
  *out = dflt;
  if (absent(j)) return NULL;
  char p[PATH_LEN];
  place(p, "%s.%s", path, key);
  return as_count(L, j, p, (double)INT32_MAX, out);
}

/* One character (Metaspace's replacement, Strip's content). */
static rx_status get_char(const loader *L, const cJSON *obj, const char *path, const char *key,
                          tok_text *text, uint32_t *cp) {
  RX_RETURN_IF_ERROR(get_text(L, obj, path, key, true, text));
  size_t i = 0;
  *cp = text->n ? uc_next(text->s, &i) : 0;
  if (!text->n || i != text->n) return INVALID(L, path, "'%s' is not one character", key);
  return NULL;
}

/* {"String": "..."} or {"Regex": "..."}: *regex is -1 for a string, else the known regex. */
static rx_status get_pattern(const loader *L, const cJSON *obj, const char *path, bool regex_ok,
                             tok_text *text, int *regex) {
  const cJSON *p = member(obj, "pattern"), *str = p ? member(p, "String") : NULL,
              *re = p ? member(p, "Regex") : NULL;
  *regex = -1;
  if (str && cJSON_IsString(str)) {
    *text = keep(L, str->valuestring);
    if (!text->n) return UNSUPPORTED(L, path, "an empty pattern");
    return NULL;
  }
  if (!re || !cJSON_IsString(re))
    return INVALID(L, path, "'pattern' is not {\"String\": ...} or {\"Regex\": ...}");
  *text = keep(L, re->valuestring);
  *regex = regex_ok ? tok_regex_find(text->s, text->n) : -1;
  if (*regex < 0)
    return UNSUPPORTED(L, path,
                       "the regex '%s' (implemented: the Split regexes of GPT-2, Llama 3 and "
                       "Qwen2 files%s)",
                       text->s, regex_ok ? "" : ", in Split only");
  return NULL;
}

/* Metaspace's prepend_scheme, or the older add_prefix_space. */
static rx_status get_prepend(const loader *L, const cJSON *obj, const char *path,
                             tok_prepend *out) {
  static const char *const names[] = {"always", "first", "never"}; /* enum tok_prepend */
  tok_text s;
  bool add = true;
  RX_RETURN_IF_ERROR(get_text(L, obj, path, "prepend_scheme", false, &s));
  RX_RETURN_IF_ERROR(get_bool(L, obj, path, "add_prefix_space", true, &add));
  *out = TOK_PREPEND_ALWAYS;
  for (int i = 0; s.s && i < 3; i++)
    if (strcmp(s.s, names[i]) == 0) *out = (tok_prepend)i;
  if (s.s && strcmp(s.s, names[*out]) != 0)
    return INVALID(L, path, "prepend_scheme '%s' is not always, first or never", s.s);
  if (!add && *out != TOK_PREPEND_NEVER) /* as the library: only "never" goes with false */
    return INVALID(L, path, "add_prefix_space false does not match prepend_scheme '%s'",
                   names[*out]);
  return NULL;
}

/* ---- pipeline steps ---- */
enum { STAGE_NORM, STAGE_PRE, STAGE_DEC };
static const struct {
  const char *what, *list; /* its name, and the key of a Sequence's steps */
} STAGES[] = {
    {"normalizer", "normalizers"}, {"pre-tokenizer", "pretokenizers"}, {"decoder", "decoders"}};

static const struct step_type {
  tok_kind kind;
  int stage;
  const char *type;
} STEP_TYPES[] = {
#define NORM_(k, name) {TOK_##k, STAGE_NORM, name},
#define PRE_(k, name)  {TOK_##k, STAGE_PRE, name},
#define DEC_(k, name)  {TOK_##k, STAGE_DEC, name},
    TOK_NORMALIZERS(NORM_) TOK_PRE_TOKENIZERS(PRE_) TOK_DECODERS(DEC_)
#undef NORM_
#undef PRE_
#undef DEC_
};

static const char *const BEHAVIOR_NAMES[] = {
#define NAME_(b, name) name,
    TOK_BEHAVIORS(NAME_)
#undef NAME_
};

static rx_status parse_split(const loader *L, const cJSON *j, const char *path, tok_step *st) {
  tok_text b;
  RX_RETURN_IF_ERROR(get_pattern(L, j, path, true, &st->text, &st->regex));
  RX_RETURN_IF_ERROR(get_bool(L, j, path, "invert", false, &st->invert));
  RX_RETURN_IF_ERROR(get_text(L, j, path, "behavior", true, &b));
  for (size_t i = 0; i < RX_ARRAY_LEN(BEHAVIOR_NAMES); i++)
    if (strcmp(b.s, BEHAVIOR_NAMES[i]) == 0) {
      st->behavior = (tok_behavior)i;
      return NULL;
    }
  return INVALID(L, path, "unknown behavior '%s'", b.s);
}

/* The fields of one step of a known kind. */
static rx_status parse_fields(const loader *L, const cJSON *j, const char *path, tok_step *st) {
  int64_t start, stop;
  switch (st->kind) {
  case TOK_NORM_PREPEND:
    return get_text(L, j, path, "prepend", true, &st->text);
  case TOK_NORM_REPLACE:
  case TOK_DEC_REPLACE:
    RX_RETURN_IF_ERROR(get_pattern(L, j, path, false, &st->text, &st->regex));
    return get_text(L, j, path, "content", true, &st->content);
  case TOK_PRE_BYTE_LEVEL:
    RX_RETURN_IF_ERROR(get_bool(L, j, path, "add_prefix_space", true, &st->prefix_space));
    return get_bool(L, j, path, "use_regex", true, &st->use_regex);
  case TOK_PRE_SPLIT:
    return parse_split(L, j, path, st);
  case TOK_PRE_METASPACE:
  case TOK_DEC_METASPACE:
    RX_RETURN_IF_ERROR(get_char(L, j, path, "replacement", &st->text, &st->cp));
    RX_RETURN_IF_ERROR(get_bool(L, j, path, "split", true, &st->split));
    return get_prepend(L, j, path, &st->prepend);
  case TOK_PRE_DIGITS:
    return get_bool(L, j, path, "individual_digits", false, &st->individual);
  case TOK_DEC_STRIP:
    RX_RETURN_IF_ERROR(get_char(L, j, path, "content", &st->text, &st->cp));
    RX_RETURN_IF_ERROR(get_count(L, j, path, "start", 0, &start));
    RX_RETURN_IF_ERROR(get_count(L, j, path, "stop", 0, &stop));
    st->start = (size_t)start;
    st->stop = (size_t)stop;
    return NULL;
  case TOK_NORM_NFC:
  case TOK_DEC_BYTE_LEVEL:
  case TOK_DEC_BYTE_FALLBACK:
  case TOK_DEC_FUSE:
    return NULL;
  }
  return NULL;
}

typedef RX_VEC(tok_step) step_vec;

/* A step, or a Sequence of them (flattened into out). */
static rx_status parse_steps(const loader *L, const cJSON *j, const char *path, int stage,
                             step_vec *out) {
  if (absent(j)) return NULL;
  tok_text type;
  if (!cJSON_IsObject(j)) return INVALID(L, path, "not a JSON object");
  RX_RETURN_IF_ERROR(get_text(L, j, path, "type", true, &type));
  if (strcmp(type.s, "Sequence") == 0) {
    const cJSON *list = member(j, STAGES[stage].list), *e;
    if (!cJSON_IsArray(list)) return INVALID(L, path, "'%s' is not a list", STAGES[stage].list);
    int i = 0;
    cJSON_ArrayForEach(e, list) {
      char p[PATH_LEN];
      place(p, "%s.%s[%d]", path, STAGES[stage].list, i++);
      RX_RETURN_IF_ERROR(parse_steps(L, e, p, stage, out));
    }
    return NULL;
  }
  for (size_t k = 0; k < RX_ARRAY_LEN(STEP_TYPES); k++) {
    if (STEP_TYPES[k].stage != stage || strcmp(STEP_TYPES[k].type, type.s) != 0) continue;
    tok_step st = {.kind = STEP_TYPES[k].kind, .regex = -1};
    RX_RETURN_IF_ERROR(parse_fields(L, j, path, &st));
    RX_VEC_PUSH(out, st);
    return NULL;
  }
  rx_strbuf known = {0};
  for (size_t k = 0; k < RX_ARRAY_LEN(STEP_TYPES); k++)
    if (STEP_TYPES[k].stage == stage)
      base_strbuf_printf(&known, "%s%s", known.len ? ", " : "", STEP_TYPES[k].type);
  rx_status s = UNSUPPORTED(L, path, "the %s '%s' is not supported (supported: Sequence, %s)",
                            STAGES[stage].what, type.s, known.data);
  base_strbuf_free(&known);
  return s;
}

static rx_status parse_stage(const loader *L, const cJSON *root, const char *key, int stage,
                             tok_step **steps, size_t *n) {
  step_vec v = {0};
  rx_status s = parse_steps(L, member(root, key), key, stage, &v);
  if (!s && v.len) {
    *steps = base_arena_dup(&L->t->arena, v.data, v.len * sizeof *v.data);
    *n = v.len;
  }
  free(v.data);
  return s;
}

/* ---- the model ---- */
static rx_status parse_vocab(const loader *L, const cJSON *vocab) {
  rx_tokenizer *t = L->t;
  if (!cJSON_IsObject(vocab)) return INVALID(L, "model.vocab", "not a JSON object");
  const cJSON *e;
  int32_t max = -1;
  cJSON_ArrayForEach(e, vocab) {
    int64_t id;
    char p[PATH_LEN];
    place(p, "model.vocab['%.64s']", e->string);
    RX_RETURN_IF_ERROR(as_count(L, e, p, TOK_MAX_VOCAB - 1, &id));
    if (tok_map_add(&t->vocab, keep(L, e->string), (int32_t)id) >= 0)
      return INVALID(L, p, "the token is listed twice");
    if ((int32_t)id > max) max = (int32_t)id;
  }
  t->nmodel = max + 1;
  t->by_id = base_arena_alloc(&t->arena, ((size_t)t->nmodel + 1) * sizeof *t->by_id);
  for (size_t i = 0; i < t->vocab.cap; i++) {
    const tok_text *k = &t->vocab.keys[i];
    if (!k->s) continue;
    tok_text *slot = &t->by_id[t->vocab.vals[i]];
    if (slot->s)
      return INVALID(L, "model.vocab", "'%s' and '%s' both have id %d", slot->s, k->s,
                     (int)t->vocab.vals[i]);
    *slot = *k;
  }
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", (unsigned)b);
    t->byte_ids[b] = tok_map_get(&t->vocab, name, strlen(name));
  }
  return NULL;
}

/* The id of a merge's side, or an error naming it. */
static rx_status merge_side(const loader *L, const char *path, const char *s, size_t n,
                            int32_t *id) {
  *id = tok_map_get(&L->t->vocab, s, n);
  if (*id < 0) return INVALID(L, path, "'%.*s' is not in the vocab", (int)n, s);
  return NULL;
}

static rx_status parse_merges(const loader *L, const cJSON *merges) {
  if (!cJSON_IsArray(merges)) return INVALID(L, "model.merges", "not a list");
  const cJSON *e;
  int i = -1;
  uint32_t rank = 0;
  bool pairs = cJSON_IsArray(cJSON_GetArrayItem(merges, 0));
  rx_strbuf both = {0};
  rx_status s = NULL;
  cJSON_ArrayForEach(e, merges) {
    char p[PATH_LEN];
    place(p, "model.merges[%d]", ++i);
    const char *a, *b;
    size_t an, bn;
    if (pairs) { /* ["a", "b"] */
      const cJSON *x = cJSON_GetArrayItem(e, 0), *y = cJSON_GetArrayItem(e, 1);
      if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !cJSON_IsString(x) ||
          !cJSON_IsString(y)) {
        s = INVALID(L, p, "not a pair of strings like the first merge");
        break;
      }
      a = x->valuestring, an = strlen(a), b = y->valuestring, bn = strlen(b);
    } else { /* "a b", and "#version" lines skipped, as the library's merges.txt reader */
      if (!cJSON_IsString(e)) {
        s = INVALID(L, p, "not a string like the first merge");
        break;
      }
      a = e->valuestring;
      if (strncmp(a, "#version", 8) == 0) continue;
      const char *sp = strchr(a, ' ');
      if (!sp || strchr(sp + 1, ' ')) {
        s = INVALID(L, p, "'%s' is not two tokens separated by one space", a);
        break;
      }
      an = (size_t)(sp - a), b = sp + 1, bn = strlen(b);
    }
    int32_t left, right, merged;
    both.len = 0;
    base_strbuf_appendn(&both, a, an);
    base_strbuf_appendn(&both, b, bn);
    if ((s = merge_side(L, p, a, an, &left)) || (s = merge_side(L, p, b, bn, &right))) break;
    if ((merged = tok_map_get(&L->t->vocab, both.data, both.len)) < 0) {
      s = INVALID(L, p, "'%s', the merge of '%.*s' and '%.*s', is not in the vocab", both.data,
                  (int)an, a, (int)bn, b);
      break;
    }
    tok_merges_put(&L->t->merges, left, right, rank++, merged);
  }
  base_strbuf_free(&both);
  return s;
}

static rx_status parse_model(const loader *L, const cJSON *root) {
  rx_tokenizer *t = L->t;
  const cJSON *m = member(root, "model"), *dropout;
  if (!cJSON_IsObject(m)) return INVALID(L, "model", "missing, or not a JSON object");
  tok_text type, prefix, suffix, unk;
  RX_RETURN_IF_ERROR(get_text(L, m, "model", "type", false, &type));
  if (type.s ? strcmp(type.s, "BPE") != 0 : !member(m, "merges"))
    return UNSUPPORTED(L, "model", "the model type '%s' is not supported (only BPE)",
                       type.s ? type.s : "(none)");
  dropout = member(m, "dropout");
  if (!absent(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0))
    return UNSUPPORTED(L, "model.dropout", "BPE dropout (random merges) is not supported");
  RX_RETURN_IF_ERROR(get_text(L, m, "model", "continuing_subword_prefix", false, &prefix));
  RX_RETURN_IF_ERROR(get_text(L, m, "model", "end_of_word_suffix", false, &suffix));
  if (prefix.n || suffix.n)
    return UNSUPPORTED(L, "model", "continuing_subword_prefix and end_of_word_suffix");
  RX_RETURN_IF_ERROR(get_bool(L, m, "model", "fuse_unk", false, &t->fuse_unk));
  RX_RETURN_IF_ERROR(get_bool(L, m, "model", "byte_fallback", false, &t->byte_fallback));
  RX_RETURN_IF_ERROR(get_bool(L, m, "model", "ignore_merges", false, &t->ignore_merges));
  RX_RETURN_IF_ERROR(parse_vocab(L, member(m, "vocab")));
  RX_RETURN_IF_ERROR(parse_merges(L, member(m, "merges")));
  RX_RETURN_IF_ERROR(get_text(L, m, "model", "unk_token", false, &unk));
  t->unk = unk.s ? tok_map_get(&t->vocab, unk.s, unk.n) : -1;
  if (unk.s && t->unk < 0) return INVALID(L, "model.unk_token", "'%s' is not in the vocab", unk.s);
  return NULL;
}

/* ---- added tokens ---- */
static rx_status parse_added_one(const loader *L, const cJSON *e, const char *p, tok_added *a) {
  int64_t id;
  if (!cJSON_IsObject(e)) return INVALID(L, p, "not a JSON object");
  RX_RETURN_IF_ERROR(get_text(L, e, p, "content", true, &a->content));
  const cJSON *jid = member(e, "id");
  if (!jid) return INVALID(L, p, "no 'id'");
  char pid[PATH_LEN];
  place(pid, "%s.id", p);
  RX_RETURN_IF_ERROR(as_count(L, jid, pid, TOK_MAX_VOCAB - 1, &id));
  a->id = (int32_t)id;
  RX_RETURN_IF_ERROR(get_bool(L, e, p, "special", false, &a->special));
  RX_RETURN_IF_ERROR(get_bool(L, e, p, "normalized", !a->special, &a->normalized));
  RX_RETURN_IF_ERROR(get_bool(L, e, p, "lstrip", false, &a->lstrip));
  RX_RETURN_IF_ERROR(get_bool(L, e, p, "rstrip", false, &a->rstrip));
  RX_RETURN_IF_ERROR(get_bool(L, e, p, "single_word", false, &a->single_word));
  int32_t in_vocab = tok_map_get(&L->t->vocab, a->content.s, a->content.n);
  if (in_vocab >= 0 && in_vocab != a->id)
    return INVALID(L, p, "'%s' has id %d here but %d in the model's vocab", a->content.s,
                   (int)a->id, (int)in_vocab);
  a->match = a->content;
  if (a->normalized && L->t->nnorm) { /* matched (and decoded) in its normalized form */
    rx_strbuf nb = {0};
    tok_normalize(L->t, a->content.s, a->content.n, &nb);
    a->match = (tok_text){base_arena_dup(&L->t->arena, nb.data, nb.len + 1), nb.len};
    base_strbuf_free(&nb);
  }
  return NULL;
}

static rx_status parse_added(const loader *L, const cJSON *root) {
  rx_tokenizer *t = L->t;
  const cJSON *list = member(root, "added_tokens"), *e;
  if (absent(list)) return NULL;
  if (!cJSON_IsArray(list)) return INVALID(L, "added_tokens", "not a list");
  t->added = base_arena_alloc(&t->arena, ((size_t)cJSON_GetArraySize(list) + 1) * sizeof *t->added);
  /* The library numbers an added token that is not in the vocab itself: the vocab's size, then
     on in the file's order. A file whose id differs is refused rather than renumbered. */
  int64_t next = (int64_t)t->vocab.len;
  int i = 0;
  cJSON_ArrayForEach(e, list) {
    char p[PATH_LEN];
    place(p, "added_tokens[%d]", i++);
    tok_added a = {0};
    RX_RETURN_IF_ERROR(parse_added_one(L, e, p, &a));
    if (!a.content.n) continue; /* the library ignores empty tokens */
    bool numbered = tok_map_get(&t->vocab, a.content.s, a.content.n) < 0 &&
                    tok_map_get(&t->added_by_content, a.content.s, a.content.n) < 0;
    if (numbered && a.id != next)
      return INVALID(L, p,
                     "'%s' has id %d, but the tokenizers library numbers it %lld (after the "
                     "vocab's %zu tokens and the added tokens before it that are not in the vocab)",
                     a.content.s, (int)a.id, (long long)next, t->vocab.len);
    next += numbered;
    int32_t seen = tok_map_add(&t->added_by_content, a.content, (int32_t)t->nadded);
    if (seen >= 0 && t->added[seen].id != a.id)
      return INVALID(L, p, "'%s' is listed twice, with ids %d and %d", a.content.s,
                     (int)t->added[seen].id, (int)a.id);
    if (seen < 0) t->added[t->nadded++] = a;
  }
  return NULL;
}

/* The id-indexed table of added tokens; two added tokens with one id are an error. */
static rx_status index_ids(const loader *L) {
  rx_tokenizer *t = L->t;
  int32_t max = t->nmodel - 1;
  for (size_t i = 0; i < t->nadded; i++)
    if (t->added[i].id > max) max = t->added[i].id;
  t->vocab_size = max + 1;
  t->added_of_id = base_arena_alloc(&t->arena, ((size_t)t->vocab_size + 1) * sizeof(int32_t));
  for (int32_t i = 0; i < t->vocab_size; i++) t->added_of_id[i] = -1;
  for (size_t i = 0; i < t->nadded; i++) {
    int32_t *slot = &t->added_of_id[t->added[i].id];
    if (*slot >= 0)
      return INVALID(L, "added_tokens", "'%s' and '%s' both have id %d", t->added[*slot].content.s,
                     t->added[i].content.s, (int)t->added[i].id);
    *slot = (int32_t)i;
  }
  tok_index_added(t);
  return NULL;
}

/* ---- the post-processor ---- */
static rx_status parse_template(const loader *L, const cJSON *j, const char *path) {
  rx_tokenizer *t = L->t;
  const cJSON *single = member(j, "single"), *specials = member(j, "special_tokens"), *e;
  if (!cJSON_IsArray(single)) return INVALID(L, path, "'single' is not a list");
  if (t->tmpl) return UNSUPPORTED(L, path, "a second TemplateProcessing");
  t->tmpl = base_arena_alloc(&t->arena, ((size_t)cJSON_GetArraySize(single) + 1) * sizeof *t->tmpl);
  int i = 0;
  cJSON_ArrayForEach(e, single) {
    char p[PATH_LEN];
    place(p, "%s.single[%d]", path, i++);
    const cJSON *seq = member(e, "Sequence"), *sp = member(e, "SpecialToken");
    const cJSON *name = member(seq ? seq : sp, "id"), *ids, *x;
    tok_piece *piece = &t->tmpl[t->ntmpl++];
    if (!(seq || sp) || !cJSON_IsString(name))
      return INVALID(L, p,
                     "not {\"Sequence\": {\"id\": ...}} or {\"SpecialToken\": {\"id\": ...}}");
    if (seq) {
      if (strcmp(name->valuestring, "A") != 0)
        return INVALID(L, p, "sequence '%s' in the single-sequence template", name->valuestring);
      piece->is_sequence = true;
      continue;
    }
    const cJSON *def = specials ? member(specials, name->valuestring) : NULL;
    if (!def || !cJSON_IsArray(ids = member(def, "ids")))
      return INVALID(L, p, "special token '%s' is not in special_tokens (with its ids)",
                     name->valuestring);
    piece->ids =
        base_arena_alloc(&t->arena, ((size_t)cJSON_GetArraySize(ids) + 1) * sizeof(int32_t));
    cJSON_ArrayForEach(x, ids) {
      int64_t id;
      RX_RETURN_IF_ERROR(as_count(L, x, p, (double)t->vocab_size - 1, &id));
      piece->ids[piece->n++] = (int32_t)id;
    }
  }
  return NULL;
}

static rx_status parse_post(const loader *L, const cJSON *j, const char *path) {
  tok_text type;
  if (absent(j)) return NULL;
  if (!cJSON_IsObject(j)) return INVALID(L, path, "not a JSON object");
  RX_RETURN_IF_ERROR(get_text(L, j, path, "type", true, &type));
  if (strcmp(type.s, "TemplateProcessing") == 0) return parse_template(L, j, path);
  if (strcmp(type.s, "ByteLevel") == 0) return NULL; /* offsets only */
  if (strcmp(type.s, "Sequence") != 0)
    return UNSUPPORTED(L, path,
                       "the post-processor '%s' is not supported (supported: TemplateProcessing, "
                       "ByteLevel, Sequence)",
                       type.s);
  const cJSON *list = member(j, "processors"), *e;
  if (!cJSON_IsArray(list)) return INVALID(L, path, "'processors' is not a list");
  int i = 0;
  cJSON_ArrayForEach(e, list) {
    char p[PATH_LEN];
    place(p, "%s.processors[%d]", path, i++);
    RX_RETURN_IF_ERROR(parse_post(L, e, p));
  }
  return NULL;
}

/* BOS: the first special token before the text in the template. EOS: those after it, else the
 * first of EOS_NAMES that is a special added token. */
static void choose_bos_eos(rx_tokenizer *t) {
  t->bos = -1;
  size_t last_seq = t->ntmpl;
  for (size_t i = 0; i < t->ntmpl; i++)
    if (t->tmpl[i].is_sequence) last_seq = i;
  for (size_t i = 0; i < t->ntmpl && !t->tmpl[i].is_sequence && t->bos < 0; i++)
    if (t->tmpl[i].n) t->bos = t->tmpl[i].ids[0];
  size_t count = 1;
  for (size_t i = last_seq + 1; i < t->ntmpl; i++) count += t->tmpl[i].n;
  t->eos = base_arena_alloc(&t->arena, count * sizeof(int32_t));
  for (size_t i = last_seq + 1; i < t->ntmpl; i++)
    for (size_t k = 0; k < t->tmpl[i].n; k++) t->eos[t->neos++] = t->tmpl[i].ids[k];
  for (size_t k = 0; k < RX_ARRAY_LEN(EOS_NAMES) && !t->neos; k++) {
    int32_t a = tok_map_get(&t->added_by_content, EOS_NAMES[k], strlen(EOS_NAMES[k]));
    if (a >= 0 && t->added[a].special) t->eos[t->neos++] = t->added[a].id;
  }
}

/* ---- loading ---- */
static rx_status parse_json(const loader *L, const char *json, size_t len, cJSON **out) {
  size_t valid = uc_valid_prefix(json, len);
  *out = NULL;
  if (valid < len)
    return base_status_make(RX_ERR_INVALID, "%s: not valid UTF-8 at byte %zu", L->name, valid);
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
  if (!root) {
    size_t off = end && end >= json ? (size_t)(end - json) : 0, line = 1, col = 1;
    for (size_t i = 0; i < off && i < len; i++) {
      if (json[i] == '\n')
        line++, col = 1;
      else
        col++;
    }
    return base_status_make(RX_ERR_INVALID, "%s:%zu:%zu: malformed JSON", L->name, line, col);
  }
  *out = root;
  return NULL;
}

static rx_status load(const loader *L, const cJSON *root) {
  rx_tokenizer *t = L->t;
  if (!cJSON_IsObject(root)) return INVALID(L, "the top level", "not a JSON object");
  RX_RETURN_IF_ERROR(parse_model(L, root));
  RX_RETURN_IF_ERROR(parse_stage(L, root, "normalizer", STAGE_NORM, &t->norm, &t->nnorm));
  RX_RETURN_IF_ERROR(parse_stage(L, root, "pre_tokenizer", STAGE_PRE, &t->pre, &t->npre));
  const cJSON *dec = member(root, "decoder");
  t->has_decoder = !absent(dec);
  RX_RETURN_IF_ERROR(parse_stage(L, root, "decoder", STAGE_DEC, &t->dec, &t->ndec));
  RX_RETURN_IF_ERROR(parse_added(L, root));
  RX_RETURN_IF_ERROR(index_ids(L));
  RX_RETURN_IF_ERROR(parse_post(L, member(root, "post_processor"), "post_processor"));
  choose_bos_eos(t);
  return NULL;
}

rx_status rx_tokenizer_load(const char *json, size_t len, const char *name,
                            rx_tokenizer **out_tokenizer) {
  if (out_tokenizer) *out_tokenizer = NULL;
  if (!out_tokenizer || (!json && len))
    return base_status_make(RX_ERR_INVALID, "rx_tokenizer_load: NULL argument");
  rx_tokenizer *t = base_calloc(1, sizeof *t);
  base_arena_init(&t->arena);
  t->name = base_arena_strdup(&t->arena, name ? name : "tokenizer.json");
  t->unk = t->bos = -1;
  loader L = {t, t->name};
  cJSON *root = NULL;
  rx_status s = parse_json(&L, json ? json : "", len, &root);
  if (!s) s = load(&L, root);
  cJSON_Delete(root);
  if (s) {
    rx_tokenizer_free(t);
    return s;
  }
  *out_tokenizer = t;
  return NULL;
}

rx_status rx_tokenizer_load_file(const char *path, rx_tokenizer **out_tokenizer) {
  if (out_tokenizer) *out_tokenizer = NULL;
  if (!path || !out_tokenizer)
    return base_status_make(RX_ERR_INVALID, "rx_tokenizer_load_file: NULL argument");
  char *text;
  size_t len;
  RX_RETURN_IF_ERROR(base_read_file(path, &text, &len));
  rx_status s = rx_tokenizer_load(text, len, path, out_tokenizer);
  free(text);
  return s;
}

void rx_tokenizer_free(rx_tokenizer *t) {
  if (!t) return;
  tok_map_free(&t->vocab);
  tok_map_free(&t->added_by_content);
  tok_merges_free(&t->merges);
  base_arena_free(&t->arena);
  free(t);
}

/* An id of a config: a whole number inside the vocab. */
static rx_status config_id(const loader *L, const cJSON *j, const char *path, int32_t *out) {
  int64_t id;
  RX_RETURN_IF_ERROR(as_count(L, j, path, (double)L->t->vocab_size - 1, &id));
  *out = (int32_t)id;
  return NULL;
}

static rx_status apply_config(const loader *L, const cJSON *root) {
  rx_tokenizer *t = L->t;
  if (!cJSON_IsObject(root)) return INVALID(L, "the top level", "not a JSON object");
  const cJSON *bos = member(root, "bos_token_id"), *eos = member(root, "eos_token_id"), *e;
  int32_t bos_id = t->bos;
  if (!absent(bos)) RX_RETURN_IF_ERROR(config_id(L, bos, "bos_token_id", &bos_id));
  if (!absent(eos)) {
    size_t n = cJSON_IsArray(eos) ? (size_t)cJSON_GetArraySize(eos) : 1, k = 0;
    int32_t *ids = base_arena_alloc(&t->arena, (n + 1) * sizeof *ids);
    if (!cJSON_IsArray(eos)) RX_RETURN_IF_ERROR(config_id(L, eos, "eos_token_id", &ids[k++]));
    const cJSON *list = cJSON_IsArray(eos) ? eos : NULL;
    cJSON_ArrayForEach(e, list) {
      char p[PATH_LEN];
      place(p, "eos_token_id[%zu]", k);
      RX_RETURN_IF_ERROR(config_id(L, e, p, &ids[k++]));
    }
    t->eos = ids;
    t->neos = k;
  }
  t->bos = bos_id;
  return NULL;
}

rx_status rx_tokenizer_set_config(rx_tokenizer *tok, const char *json, size_t len,
                                  const char *name) {
  if (!tok || (!json && len))
    return base_status_make(RX_ERR_INVALID, "rx_tokenizer_set_config: NULL argument");
  loader L = {tok, name ? name : "config.json"};
  cJSON *root = NULL;
  rx_status s = parse_json(&L, json ? json : "", len, &root);
  if (!s) s = apply_config(&L, root);
  cJSON_Delete(root);
  return s;
}

/* ---- lookups ---- */
int32_t rx_tokenizer_vocab_size(const rx_tokenizer *tok) { return tok ? tok->vocab_size : 0; }

int32_t rx_tokenizer_token_to_id(const rx_tokenizer *tok, const char *token, size_t len) {
  if (!tok || (!token && len)) return -1;
  int32_t a = tok_map_get(&tok->added_by_content, token ? token : "", len);
  return a >= 0 ? tok->added[a].id : tok_map_get(&tok->vocab, token ? token : "", len);
}

const char *rx_tokenizer_id_to_token(const rx_tokenizer *tok, int32_t id, size_t *out_len) {
  if (out_len) *out_len = 0;
  const tok_text *x = tok ? tok_text_of(tok, id) : NULL;
  if (!x) return NULL;
  if (out_len) *out_len = x->n;
  return x->s;
}

bool rx_tokenizer_is_special(const rx_tokenizer *tok, int32_t id) {
  return tok && id >= 0 && id < tok->vocab_size && tok->added_of_id[id] >= 0 &&
         tok->added[tok->added_of_id[id]].special;
}

int32_t rx_tokenizer_bos_id(const rx_tokenizer *tok) { return tok ? tok->bos : -1; }

size_t rx_tokenizer_eos_ids(const rx_tokenizer *tok, const int32_t **out_ids) {
  if (out_ids) *out_ids = tok ? tok->eos : NULL;
  return tok ? tok->neos : 0;
}

bool rx_tokenizer_is_eos(const rx_tokenizer *tok, int32_t id) {
  for (size_t i = 0; tok && i < tok->neos; i++)
    if (tok->eos[i] == id) return true;
  return false;
}
