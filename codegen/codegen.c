/* Code generation entry points: cg_codegen_rules (lower and print; the compile driver runs the
 * toolchains, driver/toolchains.c) and cg_kernels_json (the description the runtime reads,
 * docs/kernel-abi.md). */
#include "cg_int.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per language (= per target kind, in the same order), from RX_TARGET_KINDS (targets/target.h) */
static const struct {
  const char *name, *ext;
  const char *entry;   /* NULL: the kernel's name */
  const char *scalars; /* kernels.json "scalars.location" */
  bool scalars_bound;  /* ... with a binding after the buffers */
  const char *spill;   /* past the push-constant bytes (with a binding), or NULL */
  const cg_lang *L;
} langs[] = {
#define X(kind, name, lang, lname, ext, entry, scalars, bound, spill, bin, asm_ext)                \
  [RX_LANG_##lang] = {lname, ext, entry, scalars, bound, spill, &CG_LANG_##lang},
    RX_TARGET_KINDS(X)
#undef X
};

const char *cg_lang_name(rx_lang l) {
  return (unsigned)l < RX_ARRAY_LEN(langs) ? langs[l].name : "?";
}
const char *cg_lang_ext(rx_lang l) {
  return (unsigned)l < RX_ARRAY_LEN(langs) ? langs[l].ext : "?";
}

/* rx_lang and rx_target_kind are the same list */
rx_lang cg_lang_of_target(const rx_target *t) { return (rx_lang)t->kind; }

const cg_lang *cg_lang_of(rx_lang l) { return langs[l].L; }

bool cg_codegen_rules(rx_module *m, const rx_tensor_fn *scheduled, const rx_target *t,
                      const char *const *rules, int nrules, rx_diag *diag, rx_kernel_list *out) {
  out->kernels = NULL;
  out->n = 0;
  cg_kernel *ks = NULL;
  int n = 0;
  if (!cg_lower(m, scheduled, t, diag, &ks, &n)) return false;
  rx_lang lang = cg_lang_of_target(t);
  const cg_lang *L = cg_lang_of(lang);
  /* rules: one per variant; variants are the distinct kernel conditions in order */
  const rx_expr *seen[64];
  int nseen = 0;
  for (int i = 0; i < n; i++) {
    rx_kernel *k = ks[i].k;
    k->lang = lang;
    /* user names become identifiers of the language (cg_ident): the entry point, and every
     * argument's name in the source; kernels.json keeps both (docs/kernel-abi.md) */
    k->source_name = k->name;
    k->name = cg_ident(L, &m->arena, k->name);
    for (int a = 0; a < k->nargs; a++) k->args[a].ident = cg_ident(L, &m->arena, k->args[a].name);
    if (rules && nrules == 1) {
      k->rule = rules[0];
    } else if (rules) {
      int v = -1;
      for (int j = 0; j < nseen; j++)
        if (seen[j] == k->cond) v = j;
      if (v < 0 && nseen < 64) {
        v = nseen;
        seen[nseen++] = k->cond;
      }
      k->rule = v >= 0 && v < nrules ? rules[v] : NULL;
    }
  }
  bool ok = true;
  for (int i = 0; i < n && ok; i++) ok = cg_print(L, &ks[i], diag);
  if (!ok) return false;
  out->kernels = ir_module_alloc(m, sizeof(rx_kernel *) * (size_t)(n + 1));
  for (int i = 0; i < n; i++) out->kernels[i] = ks[i].k;
  out->n = n;
  return true;
}

/* ---- kernels.json ------------------------------------------------------------------------ */

static void jstr(rx_strbuf *o, const char *s) { base_strbuf_json_string(o, s); }

static void jexpr(rx_strbuf *o, const rx_expr *e) {
  if (!e) {
    base_strbuf_append(o, "null");
    return;
  }
  rx_strbuf tmp = {0};
  sym_expr_print(&tmp, e);
  jstr(o, tmp.data ? tmp.data : "");
  base_strbuf_free(&tmp);
}

void cg_kernels_json(rx_strbuf *o, const rx_target *t, const rx_tensor_fn *const *programs,
                     const rx_kernel_list *const *kernels, int n) {
  rx_lang lang = cg_lang_of_target(t);
  base_strbuf_append(o, "{\n  \"format\": \"relaxc-kernels\",\n  \"version\": 1,\n  \"target\": ");
  jstr(o, t->name);
  base_strbuf_append(o, ",\n  \"lang\": ");
  jstr(o, cg_lang_name(lang));
  base_strbuf_append(o, ",\n  \"programs\": [");
  for (int i = 0; i < n; i++) {
    const rx_tensor_fn *f = programs[i];
    base_strbuf_append(o, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
    jstr(o, f->name);
    base_strbuf_append(o, ",\n     \"params\": [");
    for (int j = 0; j < f->nparams; j++) {
      const rx_param *p = f->params[j];
      base_strbuf_append(o, j ? ",\n       " : "\n       ");
      if (p->kind == RX_PARAM_BUFFER) {
        base_strbuf_append(o, "{\"name\": ");
        jstr(o, p->buf->name);
        base_strbuf_append(o, ", \"kind\": \"buffer\", \"dtype\": ");
        jstr(o, ir_dtype_name(p->buf->dtype));
        base_strbuf_append(o, ", \"shape\": [");
        for (int d = 0; d < p->buf->ndim; d++) {
          if (d) base_strbuf_append(o, ", ");
          jexpr(o, p->buf->shape[d]);
        }
        base_strbuf_printf(o, "], \"output\": %s}", p->is_output ? "true" : "false");
      } else {
        base_strbuf_append(o, "{\"name\": ");
        jstr(o, p->var->name);
        base_strbuf_append(o, ", \"kind\": \"scalar\", \"dtype\": ");
        jstr(o, ir_dtype_name(p->dtype));
        base_strbuf_append(o, "}");
      }
    }
    base_strbuf_append(o, "],\n     \"facts\": [");
    for (int j = 0; j < f->nfacts; j++) {
      if (j) base_strbuf_append(o, ", ");
      jexpr(o, f->facts[j]);
    }
    base_strbuf_append(o, "],\n     \"kernels\": [");
    for (int j = 0; j < kernels[i]->n; j++) {
      if (j) base_strbuf_append(o, ", ");
      jstr(o, kernels[i]->kernels[j]->name);
    }
    base_strbuf_append(o, "]}");
  }
  base_strbuf_append(o, "\n  ],\n  \"kernels\": [");
  int nk = 0;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < kernels[i]->n; j++) {
      const rx_kernel *k = kernels[i]->kernels[j];
      base_strbuf_append(o, nk++ ? ",\n    {" : "\n    {");
      base_strbuf_append(o, "\"name\": ");
      jstr(o, k->name);
      base_strbuf_append(o, ", \"source_name\": ");
      jstr(o, k->source_name ? k->source_name : k->name);
      base_strbuf_append(o, ", \"program\": ");
      jstr(o, programs[i]->name);
      base_strbuf_append(o, ", \"entry\": ");
      jstr(o, langs[lang].entry ? langs[lang].entry : k->name);
      base_strbuf_printf(o, ", \"source\": \"%s.%s\"", k->name, cg_lang_ext(lang));
      if (k->binary) {
        base_strbuf_append(o, ", \"binary\": ");
        jstr(o, k->binary);
      }
      if (k->ptx) {
        base_strbuf_append(o, ", \"ptx\": ");
        jstr(o, k->ptx);
      }
      base_strbuf_append(o, ",\n     \"rule\": ");
      jstr(o, k->rule);
      base_strbuf_append(o, ", \"condition\": ");
      jexpr(o, k->cond);
      base_strbuf_append(o, ",\n     \"grid\": [");
      for (int a = 0; a < 3; a++) {
        if (a) base_strbuf_append(o, ", ");
        jexpr(o, k->grid[a]);
      }
      base_strbuf_printf(
          o, "], \"block\": [%d, %d, %d], \"shared_bytes\": %lld, \"index_bits\": %d,\n",
          k->block[0], k->block[1], k->block[2], (long long)k->shared_bytes, k->index64 ? 64 : 32);
      if (k->shared_dynamic) base_strbuf_append(o, "     \"shared_dynamic\": true,\n");
      if (k->subgroup_size)
        base_strbuf_printf(o, "     \"subgroup_size\": %d,\n", k->subgroup_size);
      if (k->coop_matrix) base_strbuf_append(o, "     \"cooperative_matrix\": true,\n");
      int nbuf = 0;
      for (int a = 0; a < k->nargs; a++) nbuf += k->args[a].kind == RX_KARG_BUFFER;
      assert(!k->uses_ubo || langs[lang].spill);
      const char *loc = k->uses_ubo ? langs[lang].spill : langs[lang].scalars;
      int binding = k->uses_ubo || langs[lang].scalars_bound ? nbuf : -1;
      base_strbuf_printf(
          o, "     \"scalars\": {\"location\": \"%s\", \"bytes\": %d, \"binding\": %d},\n", loc,
          k->scalar_bytes, binding);
      base_strbuf_append(o, "     \"args\": [");
      for (int a = 0; a < k->nargs; a++) {
        const rx_karg *g = &k->args[a];
        base_strbuf_append(o, a ? ",\n       " : "\n       ");
        base_strbuf_printf(
            o, "{\"kind\": \"%s\", \"name\": ", g->kind == RX_KARG_BUFFER ? "buffer" : "scalar");
        jstr(o, g->name);
        base_strbuf_append(o, ", \"ident\": ");
        jstr(o, g->ident ? g->ident : g->name);
        base_strbuf_append(o, ", \"dtype\": ");
        jstr(o, ir_dtype_name(g->dtype));
        if (g->kind == RX_KARG_BUFFER)
          base_strbuf_printf(o, ", \"param\": %d, \"binding\": %d, \"written\": %s%s}", g->param,
                             g->binding, g->written ? "true" : "false",
                             g->error ? ", \"error\": true" : "");
        else
          base_strbuf_printf(o, ", \"offset\": %d}", g->offset);
      }
      base_strbuf_append(o, "]");
      if (k->nchecks) {
        base_strbuf_append(o, ",\n     \"checks\": [");
        for (int c = 0; c < k->nchecks; c++) {
          base_strbuf_printf(o, "%s{\"code\": %d, \"message\": ", c ? ", " : "",
                             (int)base_check_code(k->checks[c]));
          jstr(o, k->checks[c]);
          base_strbuf_putc(o, '}');
        }
        base_strbuf_append(o, "]");
      }
      base_strbuf_append(o, "}");
    }
  }
  base_strbuf_append(o, "\n  ]\n}\n");
}
