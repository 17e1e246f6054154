/* relaxc inspect MODEL.rxm [--code] [--extract DIR]: what an artifact holds, without a device: its
 * functions with their signatures (the checks of the host program, the result from the manifest),
 * facts and planned memory, the weights (count and bytes per dtype, the section or side file they
 * live in, the parameters they bind), for an LLM its weights per format (quantization scheme or
 * dtype: tensors, weights, bytes with scales, bits per weight), its KV cache bytes per token and
 * the activations planned for prefill and decode, the kernel launches of one call of each function
 * (of a prefill forward and a decode step, split into the repeated layer and what lies outside it,
 * with one layer's kernels in launch order and their schedule rules), the kernels per target
 * (programs and their kernel variants, each with the schedule rule that made it and its condition),
 * the batcher's FSM table when it carries one (relaxc compile --batch-policy: its functions and
 * entries), and the sections with their sizes; --code adds the host program's disassembly.
 * --extract DIR writes every section as DIR/<section name> (manifest.json, host.rxvm,
 * <target>/kernels.json, the kernel sources and binaries, weights.safetensors) and the disassembly
 * as DIR/host.txt. The artifact is validated as for running (version, CRCs, every instruction, the
 * weights). A GGUF file (by its magic) is listed by tools/inspect_gguf.c instead. Exit: 0 success,
 * 1 an unreadable or corrupt artifact, 2 usage. */
#include "commands.h"

#include "base/base.h"
#include "relaxc/runtime.h"
#include "runtime/autobatch_policy.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The manifest's entry for function name, or NULL. */
static const cJSON *manifest_fn(const cJSON *m, const char *name) {
  const cJSON *fns = cJSON_GetObjectItemCaseSensitive(m, "functions"), *f;
  cJSON_ArrayForEach(f, fns) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "name");
    if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return f;
  }
  return NULL;
}

static const char *jstr(const cJSON *o, const char *field) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool jnum(const cJSON *o, const char *field, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
  if (!cJSON_IsNumber(v)) return false;
  *out = v->valuedouble;
  return true;
}

/* ---- kernel launches per call ---- */
/* Section i parsed when it is a target's kernels.json (NULL otherwise, or when malformed), with
 * the section's name and the '/' after its target's name (the target: name .. slash). */
static cJSON *target_kernels(const rx_rt_artifact *a, size_t i, const char **out_name,
                             const char **out_slash) {
  const void *data;
  size_t size;
  rx_rt_artifact_section(a, i, out_name, &data, &size);
  *out_slash = strchr(*out_name, '/');
  return *out_slash && !strcmp(*out_slash + 1, "kernels.json") ? cJSON_ParseWithLength(data, size)
                                                               : NULL;
}

/* Launches per call of program prog in one target's kernels.json: every kernel without a
 * condition, and one of the variants behind conditions (the compiler makes them mutually
 * exclusive); -1 when the target lacks the program. */
static int program_launches(const cJSON *kjson, const char *prog) {
  const cJSON *p, *kn, *kd;
  cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(kjson, "programs")) {
    const char *pname = jstr(p, "name");
    if (!pname || strcmp(pname, prog)) continue;
    int always = 0, variants = 0;
    cJSON_ArrayForEach(kn, cJSON_GetObjectItemCaseSensitive(p, "kernels")) {
      bool cond = false;
      cJSON_ArrayForEach(kd, cJSON_GetObjectItemCaseSensitive(kjson, "kernels")) {
        const char *kname = jstr(kd, "name");
        if (cJSON_IsString(kn) && kname && !strcmp(kname, kn->valuestring))
          cond = jstr(kd, "condition") != NULL;
      }
      cond ? variants++ : always++;
    }
    return always + (variants > 0);
  }
  return -1;
}

/* "97 kernel launches in 61 program calls (vulkan)", per target where they differ ("cuda: 97,
 * vulkan: 99 kernel launches in 61 program calls"); nothing for a function that launches none. */
static void format_launches(const rx_rt_artifact *a, size_t fn, rx_strbuf *out) {
  size_t ncalls = rx_rt_artifact_function_programs(a, fn, NULL, 0);
  const char **progs = ncalls ? calloc(ncalls, sizeof *progs) : NULL;
  if (!progs) return;
  rx_rt_artifact_function_programs(a, fn, progs, ncalls);
  rx_strbuf per = {0}, names = {0};
  long first = -1;
  bool differ = false;
  for (size_t i = 0; i < rx_rt_artifact_section_count(a); i++) {
    const char *name, *slash;
    cJSON *k = target_kernels(a, i, &name, &slash);
    if (!k) continue;
    long total = 0;
    for (size_t c = 0; c < ncalls && total >= 0; c++) {
      int n = program_launches(k, progs[c]);
      total = n < 0 ? -1 : total + n;
    }
    cJSON_Delete(k);
    differ = differ || (first != -1 && total != first);
    if (first == -1) first = total;
    base_strbuf_printf(&names, "%s%.*s", names.len ? ", " : "", (int)(slash - name), name);
    if (total < 0)
      base_strbuf_printf(&per, "%s%.*s: ? (a program is missing)", per.len ? ", " : "",
                         (int)(slash - name), name);
    else
      base_strbuf_printf(&per, "%s%.*s: %ld", per.len ? ", " : "", (int)(slash - name), name,
                         total);
  }
  if (names.len && !differ && first >= 0)
    base_strbuf_printf(out, "%ld kernel launches in %zu program calls (%s)", first, ncalls,
                       names.data);
  else if (names.len)
    base_strbuf_printf(out, "%s kernel launches in %zu program calls", per.data, ncalls);
  else
    base_strbuf_printf(out, "%zu program calls", ncalls);
  base_strbuf_free(&per);
  base_strbuf_free(&names);
  free(progs);
}

/* "    library calls: 2 rx_cublaslt_matmul, 1 rx_kv_extend": the builtins one call may reach
 * (both arms of an if: a dispatched matmul's library call and its generated kernel). */
static void print_externs(const rx_rt_artifact *a, size_t fn) {
  size_t n = rx_rt_artifact_function_externs(a, fn, NULL, 0);
  const char **names = n ? calloc(n, sizeof *names) : NULL;
  if (!names) return;
  rx_rt_artifact_function_externs(a, fn, names, n);
  printf("    library calls:");
  for (size_t i = 0; i < n; i++) {
    size_t count = 0;
    bool first = true;
    for (size_t j = 0; j < n; j++) {
      count += !strcmp(names[i], names[j]);
      first = first && (j >= i || strcmp(names[i], names[j]));
    }
    if (first) printf("%s %zu %s", i ? "," : "", count, names[i]);
  }
  printf("\n");
  free(names);
}

static void print_functions(const rx_rt_artifact *a, const cJSON *m) {
  size_t nfn = rx_rt_artifact_function_count(a);
  printf("functions: %zu\n", nfn);
  for (size_t f = 0; f < nfn; f++) {
    const char *name = rx_rt_artifact_function_name(a, f);
    const cJSON *mf = manifest_fn(m, name);
    printf("  %s(", name);
    size_t np = rx_rt_artifact_function_param_count(a, f);
    const cJSON *mparams = cJSON_GetObjectItemCaseSensitive(mf, "params");
    for (size_t p = 0; p < np; p++) {
      rx_rt_param_info pi;
      rx_rt_artifact_function_param(a, f, p, &pi);
      /* a parameter the host program does not check as a tensor (an object, a prim, a shape):
       * the manifest's name and struct info */
      const cJSON *mp = cJSON_GetArrayItem(mparams, (int)p);
      const char *pname = pi.name[0] ? pi.name : jstr(mp, "name");
      const char *sinfo = pi.name[0] ? pi.expected : jstr(mp, "sinfo");
      printf("%s%s: %s", p ? ", " : "", pname ? pname : "?", sinfo ? sinfo : "?");
    }
    const char *result = jstr(mf, "result");
    printf(")%s%s\n", result ? " -> " : "", result ? result : "");
    size_t nf = rx_rt_artifact_function_fact_count(a, f);
    if (nf) {
      printf("    facts:");
      for (size_t i = 0; i < nf; i++)
        printf("%s %s", i ? "," : "", rx_rt_artifact_function_fact(a, f, i));
      printf("\n");
    }
    size_t ns = rx_rt_artifact_function_storage_count(a, f);
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(mf, "memory");
    double planned = 0, without = 0, dyn = 0;
    printf("    planned memory: %zu storage%s", ns, ns == 1 ? "" : "s");
    for (size_t i = 0; i < ns; i++)
      printf("%s%s", i ? " + " : " of ", rx_rt_artifact_function_storage(a, f, i));
    printf(" bytes");
    if (jnum(mem, "planned_bytes", &planned)) printf(", %.0f bytes planned", planned);
    if (jnum(mem, "planned_bytes_without_reuse", &without))
      printf(" (%.0f without reuse)", without);
    if (jnum(mem, "dynamic_allocations", &dyn)) printf(", %.0f dynamic allocations", dyn);
    printf("\n");
    rx_strbuf launches = {0};
    format_launches(a, f, &launches);
    if (launches.len) printf("    per call: %s\n", launches.data);
    base_strbuf_free(&launches);
    print_externs(a, f);
  }
}

/* ---- launches per layer (an LLM's repeated decoder layer) ---- */
/* How the layer boundary is found: the artifact knows the layer count (llm.json's kv_cache.layers)
 * and which weight each parameter binds; a weight's layer is the first number in its name
 * ("model.layers.12.mlp.up_proj.weight", "blk.12.ffn_up.weight"; none in "lm_head.weight"). The
 * host program's listing (rx_rt_artifact_disassemble) gives each call_kernels' registers, and
 * check_tensor which parameter a register holds, so each program call is tagged with the layer
 * whose weights it reads. Layer l starts at its first call reading a weight of layer l; the layer
 * body is the calls from layer 0's start to layer 1's, and the split is made only when it is
 * exact: the starts increase, every call that reads weights lies in its own layer's span, layers
 * 1 .. L-2 run the body's programs in the same order, and the last layer's weight-reading calls
 * fit in one body length from its start (its programs may differ where its last kernels are fused
 * with what follows, such as the final norm; those are named). Anything else (one layer, a call
 * inside a function called by another, a listing that does not match the program list) prints
 * nothing rather than a guess. */

/* The first number in a weight's name, or -1. */
static int name_layer(const char *name) {
  while (*name && (*name < '0' || *name > '9')) name++;
  if (!*name) return -1;
  long v = strtol(name, NULL, 10);
  return v < 0 || v > 1000000 ? -1 : (int)v;
}

/* The layer read by each of the ncalls program calls of function fn (-1: no layer's weights, -2:
 * the weights of several layers), from its listing; false when the listing's call_kernels are not
 * progs (a call_fn, or a listing that cannot be read). */
static bool call_layers(const rx_rt_artifact *a, size_t fn, const char **progs, size_t ncalls,
                        int *out) {
  char *text = rx_rt_artifact_disassemble(a, fn);
  unsigned nparams = 0, nregs = 0;
  const char *line = text ? strchr(text, '"') : NULL;
  line = line ? strchr(line + 1, '"') : NULL;
  int *reg_param = NULL;
  if (line && sscanf(line + 1, " params %u regs %u", &nparams, &nregs) == 2)
    reg_param = malloc(((size_t)nregs + 1) * sizeof *reg_param);
  for (unsigned r = 0; reg_param && r <= nregs; r++) reg_param[r] = -1;
  size_t c = 0;
  bool ok = reg_param != NULL;
  for (line = text; ok && line && *line; line = strchr(line, '\n'), line = line ? line + 1 : 0) {
    unsigned pc, reg, param;
    char op[32];
    if (sscanf(line, " %u: %31s", &pc, op) != 2) continue;
    if (!strcmp(op, "call_fn") || !strcmp(op, "tail_call_fn")) ok = false;
    if (!strcmp(op, "check_tensor") &&
        sscanf(line, " %*u: check_tensor r%u param %u", &reg, &param) == 2 && reg <= nregs)
      reg_param[reg] = (int)param;
    if (strcmp(op, "call_kernels")) continue;
    const char *name = strchr(line, '"'), *end = name ? strchr(name + 1, '"') : NULL;
    ok = end && c < ncalls && strlen(progs[c]) == (size_t)(end - name - 1) &&
         !strncmp(name + 1, progs[c], (size_t)(end - name - 1));
    int layer = -1;
    for (const char *p = end; ok && *p && *p != '\n' && strncmp(p, " syms", 5); p++) {
      size_t wi;
      rx_rt_weight_info w;
      if (p[0] != ' ' || p[1] != 'r' || sscanf(p + 2, "%u", &reg) != 1 || reg > nregs ||
          reg_param[reg] < 0 || !rx_rt_artifact_param_weight(a, fn, (size_t)reg_param[reg], &wi) ||
          !rx_rt_artifact_weight(a, wi, &w))
        continue;
      int l = name_layer(w.name);
      layer = l < 0 ? layer : layer == -1 || layer == l ? l : -2;
    }
    if (ok) out[c++] = layer;
  }
  free(reg_param);
  rx_rt_string_free(text);
  return ok && c == ncalls;
}

/* The layer split of n calls tagged by call_layers for a model of nl layers: the first call of
 * layer 0 and the body's length; false when it cannot be made exactly (see above). */
static bool split_layers(const int *layer, const char **progs, size_t n, int nl, size_t *out_start,
                         size_t *out_len) {
  if (nl < 2) return false;
  size_t *start = calloc((size_t)nl, sizeof *start);
  bool ok = start != NULL;
  for (int l = 0; ok && l < nl; l++) {
    size_t i = 0;
    while (i < n && layer[i] != l) i++;
    ok = i < n && (l == 0 || i > start[l - 1]);
    if (ok) start[l] = i;
  }
  size_t len = ok ? start[1] - start[0] : 0;
  for (size_t i = 0; ok && i < n; i++) {
    int span = -1; /* the layer whose span holds call i */
    for (int l = 0; l < nl; l++)
      if (i >= start[l] && (l == nl - 1 ? i < start[l] + len : i < start[l + 1])) span = l;
    ok = layer[i] == -1 || layer[i] == span;
  }
  for (int l = 1; ok && l < nl; l++) {
    ok = start[l] + len <= n && (l == nl - 1 || start[l + 1] - start[l] == len);
    for (size_t i = 0; ok && l < nl - 1 && i < len; i++)
      ok = !strcmp(progs[start[0] + i], progs[start[l] + i]);
  }
  *out_start = ok ? start[0] : 0;
  *out_len = len;
  ok = ok && len > 0;
  free(start);
  return ok;
}

/* "row_reduction" for program prog in one target's kernels.json: the distinct rules of its kernels
 * in order (a dispatched program's variants: "gemv, gemm"), and its launches when more than one. */
static void program_rules(const cJSON *kjson, const char *prog, rx_strbuf *out) {
  const cJSON *p, *kn, *kd, *kernels = cJSON_GetObjectItemCaseSensitive(kjson, "kernels");
  cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(kjson, "programs")) {
    const char *pname = jstr(p, "name");
    if (!pname || strcmp(pname, prog)) continue;
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(p, "kernels");
    int nk = cJSON_GetArraySize(names), nr = 0;
    const char **rules = nk > 0 ? calloc((size_t)nk, sizeof *rules) : NULL;
    cJSON_ArrayForEach(kn, names) {
      const char *rule = "?";
      cJSON_ArrayForEach(kd, kernels) {
        const char *kname = jstr(kd, "name"), *r = jstr(kd, "rule");
        if (cJSON_IsString(kn) && kname && r && !strcmp(kname, kn->valuestring)) rule = r;
      }
      bool seen = false;
      for (int i = 0; i < nr; i++) seen = seen || !strcmp(rules[i], rule);
      if (rules && !seen) rules[nr++] = rule;
    }
    for (int i = 0; i < nr; i++) base_strbuf_printf(out, "%s%s", i ? ", " : "", rules[i]);
    free(rules);
    int n = program_launches(kjson, prog);
    if (n > 1) base_strbuf_printf(out, "; %d launches", n);
    return;
  }
}

/* Under "per step: ...": per target, the launches per layer and outside the layers, the programs
 * where the last layer differs from the others, and one layer's kernels in launch order with their
 * schedule rules. Nothing when the split cannot be made (see above). */
static void print_layers(const rx_rt_artifact *a, size_t fn, int nl) {
  size_t n = rx_rt_artifact_function_programs(a, fn, NULL, 0), start = 0, len = 0;
  const char **progs = n ? calloc(n, sizeof *progs) : NULL;
  int *layer = n ? calloc(n, sizeof *layer) : NULL;
  if (progs && layer) rx_rt_artifact_function_programs(a, fn, progs, n);
  if (!progs || !layer || !call_layers(a, fn, progs, n, layer) ||
      !split_layers(layer, progs, n, nl, &start, &len)) {
    free(progs);
    free(layer);
    return;
  }
  size_t last = start + (size_t)(nl - 1) * len; /* the last layer's first call */
  for (size_t i = 0; i < rx_rt_artifact_section_count(a); i++) {
    const char *name, *slash;
    cJSON *k = target_kernels(a, i, &name, &slash);
    if (!k) continue;
    long body = 0, tail = 0, total = 0;
    for (size_t c = 0; c < n && total >= 0; c++) {
      int m = program_launches(k, progs[c]);
      total = m < 0 ? -1 : total + m;
      body += c >= start && c < start + len ? m : 0;
      tail += c >= last && c < last + len ? m : 0;
    }
    long outside = total - (long)(nl - 1) * body - tail;
    if (total >= 0)
      printf("      per layer (%.*s): %ld kernel launches x %d layers + %ld outside the layers\n",
             (int)(slash - name), name, body, nl, outside);
    for (size_t c = 0; c < len && total >= 0; c++)
      if (strcmp(progs[start + c], progs[last + c]))
        printf("        the last layer runs %s in place of %s\n", progs[last + c],
               progs[start + c]);
    if (total >= 0)
      printf("      one layer's kernels in launch order (%.*s):\n", (int)(slash - name), name);
    for (size_t c = 0; c < len && total >= 0; c++) {
      rx_strbuf rules = {0};
      program_rules(k, progs[start + c], &rules);
      printf("        %s (%s)\n", progs[start + c], rules.len ? rules.data : "?");
      base_strbuf_free(&rules);
    }
    cJSON_Delete(k);
  }
  free(progs);
  free(layer);
}

static size_t count_lines(const char *s) {
  size_t n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* An LLM artifact (its llm.json section): the model, the KV cache's bytes per token, and the
 * activation memory planned for prefill and decode at their bounds. */
static void print_llm(const rx_rt_artifact *a, const cJSON *m) {
  const char *text = NULL, *chat = NULL;
  size_t len = 0, chat_len = 0;
  for (size_t i = 0; i < rx_rt_artifact_section_count(a); i++) {
    const char *sname;
    const void *data;
    size_t size;
    if (!rx_rt_artifact_section(a, i, &sname, &data, &size)) continue;
    if (!strcmp(sname, "llm.json")) {
      text = data;
      len = size;
    } else if (!strcmp(sname, "chat_template.json")) {
      chat = data;
      chat_len = size;
    }
  }
  cJSON *j = text ? cJSON_ParseWithLength(text, len) : NULL;
  if (!j) return;
  const cJSON *kv = cJSON_GetObjectItemCaseSensitive(j, "kv_cache");
  double vocab = 0, maxlen = 0, batch = 0, layers = 0, heads = 0, dim = 0, page = 0;
  jnum(j, "vocab_size", &vocab);
  jnum(j, "max_seq_len", &maxlen);
  jnum(j, "max_batch", &batch);
  jnum(kv, "layers", &layers);
  jnum(kv, "kv_heads", &heads);
  jnum(kv, "head_dim", &dim);
  jnum(kv, "page_size", &page);
  const char *arch = jstr(j, "architecture"), *dt = jstr(j, "dtype"), *kvt = jstr(kv, "dtype");
  double es = kvt && !strcmp(kvt, "f32") ? 4 : 2;
  printf("LLM: %s in %s, vocabulary %.0f, sequences up to %.0f tokens, decode batches up to "
         "%.0f\n",
         arch ? arch : "?", dt ? dt : "?", vocab, maxlen, batch);
  printf("  KV cache: %.0f bytes per token (%.0f layers x keys and values x %.0f kv heads x %.0f "
         "x %s), pages of %.0f tokens\n",
         layers * 2 * heads * dim * es, layers, heads, dim, kvt ? kvt : "?", page);
  const char *fns[2] = {"prefill", "decode"}, *bound[2] = {"n", "b"}, *per[2] = {"forward", "step"};
  for (int i = 0; i < 2; i++) {
    double planned = 0;
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(manifest_fn(m, fns[i]), "memory");
    int at_run_time = 0; /* storages sized at each call (-1 in the manifest) */
    const cJSON *st;
    cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(mem, "storages")) {
      at_run_time += cJSON_IsNumber(st) && st->valuedouble < 0;
    }
    if (jnum(mem, "planned_bytes", &planned)) {
      printf("  %s: %.0f bytes of activations planned (at %s <= %.0f)", fns[i], planned, bound[i],
             i ? batch : maxlen);
      if (at_run_time)
        printf(", %d storage%s sized at each call", at_run_time, at_run_time == 1 ? "" : "s");
      printf("\n");
    }
    for (size_t f = 0; f < rx_rt_artifact_function_count(a); f++) {
      if (strcmp(rx_rt_artifact_function_name(a, f), fns[i])) continue;
      rx_strbuf launches = {0};
      format_launches(a, f, &launches);
      if (launches.len) printf("    per %s: %s\n", per[i], launches.data);
      if (launches.len && layers >= 2 && layers <= 1e6) print_layers(a, f, (int)layers);
      base_strbuf_free(&launches);
    }
  }
  const cJSON *moe = cJSON_GetObjectItemCaseSensitive(j, "moe"); /* llama.c's moe_numbers */
  double ne = 0, k = 0, sl = 0, np = 0, na = 0, ab = 0, db = 0;
  if (jnum(moe, "experts", &ne) && jnum(moe, "top_k", &k) && jnum(moe, "sparse_layers", &sl) &&
      jnum(moe, "params", &np) && jnum(moe, "active_params", &na) &&
      jnum(moe, "active_bytes", &ab) && jnum(moe, "decode_bytes", &db) && ab > 0) {
    printf("  mixture of experts: %.0f of %.0f experts per token in %.0f of %.0f layers; %.0f "
           "parameters, %.0f active per token (%.0f of %.0f experts and every dense weight, "
           "%.0f bytes)\n",
           k, ne, sl, layers, np, na, k, ne, ab);
    printf("  decode reads %.0f bytes of weights per token (%.3f x the active parameters' bytes: "
           "the token's %.0f experts' rows, one embedding row, every dense weight)\n",
           db, db / ab, k);
  }
  const cJSON *e; /* the weights by format: a quantization scheme or a plain dtype */
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "weight_formats")) {
    double nt = 0, nw = 0, nb = 0;
    const char *fmt = jstr(e, "format");
    if (fmt && jnum(e, "tensors", &nt) && jnum(e, "weights", &nw) && jnum(e, "bytes", &nb) &&
        nw > 0)
      printf("  weights in %s: %.0f tensors, %.0f weights, %.0f bytes (%.3g bits per weight)\n",
             fmt, nt, nw, nb, 8 * nb / nw);
  }
  cJSON_Delete(j);
  /* the chat template relaxc serve and relaxc generate --chat render (chat_template.json) */
  cJSON *ct = chat ? cJSON_ParseWithLength(chat, chat_len) : NULL;
  const char *tmpl = ct ? jstr(ct, "chat_template") : NULL;
  if (tmpl)
    printf("  chat template: %zu bytes, %zu lines (bos_token \"%s\", eos_token \"%s\")\n",
           strlen(tmpl), 1 + count_lines(tmpl), jstr(ct, "bos_token") ? jstr(ct, "bos_token") : "",
           jstr(ct, "eos_token") ? jstr(ct, "eos_token") : "");
  else
    printf("  chat template: none (chat requests use the fallback format, docs/llm.md)\n");
  cJSON_Delete(ct);
}

/* The weights: where they live, count and bytes per dtype, the parameters they bind. */
static void print_weights(const rx_rt_artifact *a) {
  size_t n = rx_rt_artifact_weight_count(a), count[RX_DTYPE_COUNT] = {0};
  if (!n) return;
  unsigned long long total = 0, bytes[RX_DTYPE_COUNT] = {0};
  rx_rt_weight_info w;
  for (size_t i = 0; i < n; i++) {
    rx_rt_artifact_weight(a, i, &w);
    total += w.bytes;
    count[w.dtype]++;
    bytes[w.dtype] += w.bytes;
  }
  const char *file = rx_rt_artifact_weights_file(a);
  printf("weights: %zu tensor%s, %llu bytes, %s %s\n", n, n == 1 ? "" : "s", total,
         file ? "in the file" : "in the section", file ? file : "weights.safetensors");
  for (int t = 0; t < RX_DTYPE_COUNT; t++)
    if (count[t])
      printf("  %s: %zu tensor%s, %llu bytes\n", rx_rt_dtype_name((rx_dtype)t), count[t],
             count[t] == 1 ? "" : "s", bytes[t]);
  bool *used = calloc(n, sizeof *used);
  for (size_t f = 0; used && f < rx_rt_artifact_function_count(a); f++) {
    size_t np = rx_rt_artifact_function_param_count(a, f), k = 0, wi;
    rx_strbuf names = {0};
    for (size_t p = 0; p < np; p++) {
      if (!rx_rt_artifact_param_weight(a, f, p, &wi)) continue;
      rx_rt_param_info pi;
      rx_rt_artifact_function_param(a, f, p, &pi);
      rx_rt_artifact_weight(a, wi, &w);
      used[wi] = true;
      base_strbuf_printf(&names, "%s%s", k++ ? ", " : "", pi.name);
      if (strcmp(pi.name, w.name)) base_strbuf_printf(&names, " (weight %s)", w.name);
    }
    if (k)
      printf("  %s binds %zu of its %zu parameters: %s\n", rx_rt_artifact_function_name(a, f), k,
             np, names.data);
    base_strbuf_free(&names);
  }
  size_t free_n = 0;
  for (size_t i = 0; used && i < n; i++)
    if (!used[i] && rx_rt_artifact_weight(a, i, &w))
      printf("%s %s", free_n++ ? "," : "  bound to no parameter (tensor constants):", w.name);
  if (free_n) printf("\n");
  free(used);
}

static void print_kernels(const rx_rt_artifact *a) {
  size_t n = rx_rt_artifact_section_count(a);
  printf("targets: %s\n", rx_rt_artifact_targets(a)[0] ? rx_rt_artifact_targets(a) : "none");
  for (size_t i = 0; i < n; i++) {
    const char *name;
    const void *data;
    size_t size;
    rx_rt_artifact_section(a, i, &name, &data, &size);
    const char *slash = strchr(name, '/');
    if (!slash || strcmp(slash + 1, "kernels.json")) continue;
    cJSON *k = cJSON_ParseWithLength(data, size);
    if (!k) {
      printf("  %.*s: kernels.json is malformed\n", (int)(slash - name), name);
      continue;
    }
    const cJSON *programs = cJSON_GetObjectItemCaseSensitive(k, "programs");
    const cJSON *kernels = cJSON_GetObjectItemCaseSensitive(k, "kernels");
    const char *target = jstr(k, "target");
    printf("  %.*s (target %s): %d programs, %d kernels\n", (int)(slash - name), name,
           target ? target : "?", cJSON_GetArraySize(programs), cJSON_GetArraySize(kernels));
    const cJSON *p;
    cJSON_ArrayForEach(p, programs) {
      const char *pname = jstr(p, "name");
      printf("    %s:", pname ? pname : "?");
      const cJSON *kn;
      int j = 0;
      cJSON_ArrayForEach(kn, cJSON_GetObjectItemCaseSensitive(p, "kernels")) {
        if (!cJSON_IsString(kn)) continue;
        const char *cond = NULL, *rule = NULL;
        const cJSON *kd;
        cJSON_ArrayForEach(kd, kernels) {
          const char *kname = jstr(kd, "name");
          if (kname && !strcmp(kname, kn->valuestring)) {
            cond = jstr(kd, "condition");
            rule = jstr(kd, "rule");
          }
        }
        printf("%s %s", j++ ? "," : "", kn->valuestring);
        if (rule || cond)
          printf(" (%s%s%s)", rule ? rule : "",
                 rule && cond ? ", when "
                 : cond       ? "when "
                              : "",
                 cond ? cond : "");
      }
      printf("\n");
    }
    cJSON_Delete(k);
  }
}

/* A section name is a relative path of plain components ("cuda/add.ptx"): no "..", no leading
 * '/', no empty component (the loader checks its bytes, not what a file name may be). */
static bool safe_name(const char *name) {
  if (!name[0] || name[0] == '/') return false;
  for (const char *p = name; *p;) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.')) return false;
    p += n + (e != NULL);
    if (e && !*p) return false;
  }
  return true;
}

static bool write_out(const char *dir, const char *name, const void *data, size_t size) {
  rx_strbuf path = {0};
  base_strbuf_printf(&path, "%s/%s", dir, name);
  char *sub = cli_dir_of(path.data);
  bool ok = cli_make_dir(sub);
  free(sub);
  FILE *f = ok ? fopen(path.data, "wb") : NULL;
  if (ok && !f)
    fprintf(stderr, "relaxc: error: cannot write '%s': %s\n", path.data, strerror(errno));
  ok = f && fwrite(data, 1, size, f) == size;
  if (f && fclose(f) != 0) ok = false;
  if (f && !ok) fprintf(stderr, "relaxc: error: writing '%s' failed\n", path.data);
  base_strbuf_free(&path);
  return ok;
}

/* --extract DIR: every section, then the disassembly of every function as host.txt. */
static bool extract(const rx_rt_artifact *a, const char *dir) {
  if (!cli_make_dir(dir)) return false;
  size_t n = rx_rt_artifact_section_count(a);
  for (size_t i = 0; i < n; i++) {
    const char *name;
    const void *data;
    size_t size;
    rx_rt_artifact_section(a, i, &name, &data, &size);
    if (!safe_name(name) || !strcmp(name, "host.txt")) {
      fprintf(stderr, "relaxc: error: section %zu: '%s' is not a file name under '%s'\n", i, name,
              dir);
      return false;
    }
    if (!write_out(dir, name, data, size)) return false;
  }
  rx_strbuf text = {0};
  for (size_t f = 0; f < rx_rt_artifact_function_count(a); f++) {
    char *t = rx_rt_artifact_disassemble(a, f);
    if (!t) {
      base_strbuf_free(&text);
      fputs("relaxc: error: out of host memory for the disassembly\n", stderr);
      return false;
    }
    base_strbuf_append(&text, t);
    rx_rt_string_free(t);
  }
  bool ok = write_out(dir, "host.txt", text.data ? text.data : "", text.len);
  base_strbuf_free(&text);
  if (ok) printf("extracted %zu sections and host.txt into %s/\n", n, dir);
  return ok;
}

/* Prints what artifact rank `rank` of model (0 of a plain one) holds; extracts it to xdir. */
/* The batcher's FSM table (relaxc compile --batch-policy), checked by the loader already: its
 * functions in their order and its entries, learned or left to the agenda rule. */
static void print_batch_policy(const rx_rt_artifact *a) {
  for (size_t i = 0; i < rx_rt_artifact_section_count(a); i++) {
    const char *name;
    const void *data;
    size_t size;
    rt_abp_table t;
    rx_rt_artifact_section(a, i, &name, &data, &size);
    if (strcmp(name, RT_ABP_SECTION)) continue;
    rx_status s = rt_abp_parse(data, size, RT_ABP_SECTION, &t);
    if (s) { /* the loader refuses such an artifact: not reached */
      printf("batch policy: %s\n", rx_status_message(s));
      rx_status_free(s);
      return;
    }
    printf("batch policy: an FSM table over %zu function%s (", t.nfns, t.nfns == 1 ? "" : "s");
    for (size_t f = 0; f < t.nfns; f++)
      printf("%s%.*s", f ? ", " : "", (int)t.name_len[f], t.name[f]);
    printf("), %zu entries: %zu learned, %zu left to the agenda rule\n", t.nstates, t.learned,
           t.nstates - t.learned);
  }
}

static bool inspect_one(const char *model, int rank, bool code, const char *xdir) {
  rx_rt_artifact *a = NULL;
  rx_status s = rx_rt_artifact_load_rank(NULL, model, rank, &a);
  if (s) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(s));
    rx_status_free(s);
    return false;
  }
  cJSON *m = cJSON_Parse(rx_rt_artifact_manifest(a)); /* validated by the loader */
  if (!m) {                                           /* valid JSON, so only out of memory */
    fputs("relaxc: error: out of host memory reading the manifest\n", stderr);
    rx_rt_artifact_release(a);
    return false;
  }
  size_t total = 0, n = rx_rt_artifact_section_count(a);
  for (size_t i = 0; i < n; i++) {
    size_t size;
    rx_rt_artifact_section(a, i, NULL, NULL, &size);
    total += size;
  }
  const char *compiler = jstr(m, "compiler");
  printf("%s: relaxc artifact, %zu sections, %zu bytes of contents%s%s\n", model, n, total,
         compiler ? ", written by " : "", compiler ? compiler : "");
  print_functions(a, m);
  double peak;
  if (jnum(m, "planned_bytes", &peak))
    printf("planned memory (largest function): %.0f bytes\n", peak);
  print_weights(a);
  print_llm(a, m);
  print_batch_policy(a);
  print_kernels(a);
  printf("sections:\n");
  for (size_t i = 0; i < n; i++) {
    const char *name;
    size_t size;
    rx_rt_artifact_section(a, i, &name, NULL, &size);
    printf("  %-40s %10zu bytes\n", name, size);
  }
  if (code)
    for (size_t f = 0; f < rx_rt_artifact_function_count(a); f++) {
      char *text = rx_rt_artifact_disassemble(a, f);
      if (text) fputs(text, stdout);
      rx_rt_string_free(text);
    }
  bool ok = !xdir || extract(a, xdir);
  cJSON_Delete(m);
  rx_rt_artifact_release(a);
  return ok;
}

int cli_cmd_inspect(const rx_cli_command *cmd, int argc, char **argv) {
  const char *model = NULL, *xdir = NULL;
  bool code = false;
  rx_cli_args it = cli_begin(cmd, argc, argv);
  while (cli_next(&it)) {
    if (!it.flag) {
      if (model) return cli_usage_error(cmd, "inspect takes one MODEL.rxm, got '%s' too", it.value);
      model = it.value;
    } else if (!strcmp(it.flag, "--code")) {
      code = true;
    } else if (!strcmp(it.flag, "--extract")) {
      xdir = it.value;
    } else {
      return cli_unhandled(&it);
    }
  }
  if (it.status >= 0) return it.status;
  if (!model) return cli_usage_error(cmd, "%s", "inspect needs a MODEL.rxm or MODEL.gguf");
  if (!cli_not_dir(model)) return 1;
  if (cli_inspect_is_gguf(model)) {
    if (code || xdir)
      return cli_usage_error(cmd, "%s applies to an artifact, not to the GGUF file '%s'",
                             code ? "--code" : "--extract", model);
    return cli_inspect_gguf(model);
  }
  int ranks = 1;
  rx_status rs = rx_rt_artifact_rank_count(model, &ranks);
  if (rs) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(rs));
    rx_status_free(rs);
    return 1;
  }
  if (ranks > 1 && xdir)
    return cli_usage_error(cmd, "--extract takes a plain artifact; '%s' holds %d ranks", model,
                           ranks);
  if (ranks > 1) printf("%s: multi-rank artifact, %d ranks\n", model, ranks);
  bool ok = true;
  for (int r = 0; ok && r < ranks; r++) {
    if (ranks > 1) printf("\n== rank %d ==\n", r);
    ok = inspect_one(model, r, code, xdir);
  }
  return ok ? 0 : 1;
}
