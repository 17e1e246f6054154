/* User names that are reserved words of a target language (issue 10): every word of the three
 * reserved-word tables (cg_lang.reserved of codegen/cuda.c, glsl.c, metal.c) used as a user
 * name, through the real printers and the real compilers.
 *
 * 1. cg_ident alone, per language, over every word of all three tables plus odd names (a '.',
 *    leading digit or underscore, "__", the gl_ / rx_ prefixes, names shaped like its own
 *    output): each result is a valid identifier (letters, digits, single '_', not starting with
 *    a digit or '_'), is not reserved in the language, is none of the names the printers
 *    generate, and distinct inputs give distinct results. Spot checks: CUDA `double` and
 *    `expm1`, GLSL `cast`, `gl_x`.
 * 2. A generated module of tensor programs in which the words take turns as program name,
 *    symbolic dimension, loop variable, input buffer, output buffer and let variable (every
 *    word is a let variable and an input buffer of some program; as many as fit are program
 *    names, dimensions and loop variables). Each program is scheduled and printed for CUDA
 *    sm_80, Vulkan (lavapipe) and Metal (apple7): the CUDA C compiles with NVRTC, the SPIR-V
 *    passes spirv-val, and the CUDA C and MSL run in the SIMT emulator, their outputs checked
 *    against the value computed here: y = 0.5 * sum_i b_i + 2 * i + j + D1. kernels.json
 *    records the user's names beside the identifiers.
 * Words that are keywords or dtypes of the .rx text format cannot be user names and are left
 * out of part 2 (the parser refuses them), as are `nan` and `inf` (float literals there).
 *
 * usage: test_identifiers TESTS_DIR */
#include "support_kernels.h"
#include "support_pipeline.h" /* rxk_codegen */

#include "base/base.h"
#include "codegen/cg_int.h"
#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/schedule.h"
#include "simt_harness.h"
#include "targets/target.h"
#include "targets/toolchain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed, skipped;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    failed++;                                                                                      \
    fprintf(stderr, "FAIL: " __VA_ARGS__);                                                         \
    fputc('\n', stderr);                                                                           \
  } while (0)

#define BAD(...)                                                                                   \
  do {                                                                                             \
    bad++;                                                                                         \
    FAIL(__VA_ARGS__);                                                                             \
  } while (0)

static const cg_lang *const langs[] = {&cg_cuda, &cg_glsl, &cg_metal};

/* Names the printers generate (cprinter.c, cuda.c, glsl.c, metal.c). */
static const char *const generated[] = {"rx_erf",
                                        "rx_floordiv",
                                        "rx_floormod",
                                        "rx_z",
                                        "rx_pc",
                                        "rx_push",
                                        "rx_ub",
                                        "rx_ubo",
                                        "rx_buf0",
                                        "rx_buf1",
                                        "rx_p",
                                        "rx_gid",
                                        "rx_tid",
                                        "rx_params",
                                        "rx_subgroup_sum",
                                        "rx_subgroup_max",
                                        "rx_subgroup_min",
                                        "main"};

static const char *const odd[] = {
    "a.b",      "a.b.c",       "1x",     "_x",       "__x",         "x__y", "x_",
    "gl_x",     "gl_Position", "rx_erf", "rx_u_x",   "rx_u_double", "rx_x", "rx_xa_2eb",
    "u_double", "double_",     "Double", "a-b",      "x y",         "",     "\xc3\xa9t\xc3\xa9",
    "_",        "a__",         "rx_",    "rx_params"};

/* All words of the tables (each language's own and the shared C++ list), each once (heap array
 * of borrowed strings). */
static void add_words(rx_ptrvec *out, const char *const *list) {
  for (const char *const *w = list; w && *w; w++) {
    bool seen = false;
    for (size_t i = 0; i < out->len && !seen; i++) seen = strcmp(out->data[i], *w) == 0;
    if (!seen) base_ptrvec_push(out, (void *)*w);
  }
}

static void all_words(rx_ptrvec *out) {
  for (size_t l = 0; l < RX_ARRAY_LEN(langs); l++) {
    add_words(out, langs[l]->reserved_shared);
    add_words(out, langs[l]->reserved);
  }
}

static bool valid_ident(const char *s) {
  if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return false;
  for (const char *c = s; *c; c++) {
    bool alnum = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9');
    if (!alnum && !(*c == '_' && c[1] != '_')) return false;
  }
  return true;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void check_mangler(void) {
  rx_ptrvec words = {0};
  all_words(&words);
  for (size_t i = 0; i < RX_ARRAY_LEN(odd); i++) base_ptrvec_push(&words, (void *)odd[i]);
  rx_arena arena = {0};
  for (size_t l = 0; l < RX_ARRAY_LEN(langs); l++) {
    const cg_lang *L = langs[l];
    const char *ln = cg_lang_name(L->lang);
    const char **out = base_calloc(words.len + 1, sizeof *out);
    int bad = 0;
    for (size_t i = 0; i < words.len; i++) {
      const char *w = words.data[i], *m = cg_ident(L, &arena, w);
      out[i] = m;
      if (!valid_ident(m))
        BAD("%s: '%s' -> '%s' is not a valid identifier", ln, w, m);
      else if (cg_is_reserved(L, m))
        BAD("%s: '%s' -> '%s' is reserved", ln, w, m);
      for (size_t g = 0; g < RX_ARRAY_LEN(generated); g++)
        if (!strcmp(m, generated[g])) BAD("%s: '%s' -> generated name '%s'", ln, w, m);
      if (strcmp(cg_ident(L, &arena, w), m)) BAD("%s: '%s' mangles differently twice", ln, w);
    }
    qsort(out, words.len, sizeof *out, cmp_str);
    for (size_t i = 1; i < words.len; i++)
      if (!strcmp(out[i], out[i - 1])) BAD("%s: two names map to '%s'", ln, out[i]);
    free(out);
    if (!bad) passed++;
  }
  static const struct {
    const cg_lang *L;
    const char *in, *want;
  } spot[] = {{&cg_cuda, "double", "rx_u_double"},
              {&cg_cuda, "expm1", "rx_u_expm1"},
              {&cg_cuda, "threadIdx", "rx_u_threadIdx"},
              {&cg_cuda, "and", "rx_u_and"},
              {&cg_cuda, "cast", "cast"},
              {&cg_glsl, "cast", "rx_u_cast"},
              {&cg_glsl, "gl_x", "rx_u_gl_x"},
              {&cg_glsl, "double", "rx_u_double"},
              {&cg_metal, "kernel", "rx_u_kernel"},
              {&cg_metal, "cast", "cast"},
              {&cg_cuda, "a.b", "rx_xa_2eb"},
              {&cg_glsl, "__x", "rx_x_5f_5fx"},
              {&cg_metal, "1x", "rx_x1x"},
              {&cg_cuda, "rx_erf", "rx_u_rx_erf"},
              {&cg_cuda, "weights", "weights"}};
  for (size_t i = 0; i < RX_ARRAY_LEN(spot); i++) {
    const char *m = cg_ident(spot[i].L, &arena, spot[i].in);
    if (strcmp(m, spot[i].want))
      FAIL("%s: '%s' -> '%s', expected '%s'", cg_lang_name(spot[i].L->lang), spot[i].in, m,
           spot[i].want);
    else
      passed++;
  }
  base_arena_free(&arena);
  base_ptrvec_free(&words);
}

/* ---- part 2: the words as every kind of name, compiled and run ---- */

enum {
  NB = 24, /* input buffers per program (Metal: 31 buffer slots with the outputs) */
  D0 = 3,
  D1 = 37 /* sizes: D1 not a multiple of any block size */
};

typedef struct prog {
  const char *name, *dim[2], *loop[2], *in[NB], *out, *let[NB];
} prog;

/* Keywords and dtypes of the .rx text, and the float literals nan and inf. */
static bool rx_word(const char *w) {
  return ir_text_is_reserved(w, strlen(w)) || !strcmp(w, "nan") || !strcmp(w, "inf");
}

/* The program p of P over words W (n of them): every role from its own stretch of W, names
 * unique within the program. */
static void make_prog(prog *g, const char **W, size_t n, size_t p, size_t P) {
  const char *used[4 + 2 * NB + 2] = {0}; /* = {0}: gcc -O0 -Wmaybe-uninitialized */
  int nu = 0;
  size_t next;
#define PICK(dst, start)                                                                           \
  do {                                                                                             \
    next = (start);                                                                                \
    for (;;) {                                                                                     \
      const char *w = W[next++ % n];                                                               \
      bool dup = false;                                                                            \
      for (int u = 0; u < nu && !dup; u++) dup = !strcmp(used[u], w);                              \
      if (!dup) {                                                                                  \
        (dst) = used[nu++] = w;                                                                    \
        break;                                                                                     \
      }                                                                                            \
    }                                                                                              \
  } while (0)
  PICK(g->name, p);
  PICK(g->dim[0], P + 4 * p);
  PICK(g->dim[1], P + 4 * p + 1);
  PICK(g->loop[0], P + 4 * p + 2);
  PICK(g->loop[1], P + 4 * p + 3);
  PICK(g->out, 5 * P + p);
  for (int i = 0; i < NB; i++) PICK(g->in[i], p * NB + i + n / 2);
  for (int i = 0; i < NB; i++) PICK(g->let[i], p * NB + i);
#undef PICK
}

static void print_prog(rx_strbuf *o, const prog *g) {
  base_strbuf_printf(o, "tensor_fn %s(", g->name);
  for (int i = 0; i < NB; i++)
    base_strbuf_printf(o, "%s: f32[%s, %s], ", g->in[i], g->dim[0], g->dim[1]);
  base_strbuf_printf(o, "out %s: f32[%s, %s]) {\n", g->out, g->dim[0], g->dim[1]);
  base_strbuf_printf(o, "  for %s in 0..%s {\n    for %s in 0..%s {\n", g->loop[0], g->dim[0],
                     g->loop[1], g->dim[1]);
  for (int i = 0; i < NB; i++) {
    base_strbuf_printf(o, "      let %s: f32 = ", g->let[i]);
    if (i) base_strbuf_printf(o, "%s + ", g->let[i - 1]);
    base_strbuf_printf(o, "%s[%s, %s] * 0.5\n", g->in[i], g->loop[0], g->loop[1]);
  }
  base_strbuf_printf(o, "      %s[%s, %s] = %s + f32(%s) * 2.0 + f32(%s) + f32(%s)\n", g->out,
                     g->loop[0], g->loop[1], g->let[NB - 1], g->loop[0], g->loop[1], g->dim[1]);
  base_strbuf_append(o, "    }\n  }\n}\n");
}

static float input_at(int b, int e) { return (float)((b * 7 + e * 3) % 11) - 5.0f; }

static float want_at(int i, int j) {
  float s = 0;
  for (int b = 0; b < NB; b++) s += input_at(b, i * D1 + j) * 0.5f;
  return s + (float)i * 2.0f + (float)j + (float)D1;
}

static simt_options simt_opts;

/* Runs the kernels of kl in the SIMT emulator and checks the output. */
static void run_emulated(const rx_tensor_fn *f, const rx_kernel_list *kl, const char *what) {
  float *bufs[NB + 1];
  for (int b = 0; b <= NB; b++) {
    bufs[b] = base_calloc(D0 * D1, sizeof(float));
    for (int e = 0; e < D0 * D1 && b < NB; e++) bufs[b][e] = input_at(b, e);
  }
  rxk_env env;
  rxk_program_vars(f, &env);
  for (int v = 0; v < env.n; v++) {
    /* dims: the shape of the first parameter, in order */
    env.values[v] = env.vars[v] == f->params[0]->buf->shape[0] ? D0 : D1;
  }
  bool ok = true;
  bool metal = kl->n && kl->kernels[0]->lang == RX_LANG_MSL;
  for (int k = 0; k < kl->n && ok; k++) {
    const rx_kernel *kn = kl->kernels[k];
    simt_module *mod = NULL;
    char *err = NULL;
    if (simt_module_compile(&simt_opts, metal ? SIMT_METAL : SIMT_CUDA, kn->source, kn->name, &mod,
                            &err)) {
      if (err && strstr(err, "not found"))
        skipped++;
      else
        FAIL("%s: %s does not compile in the SIMT emulator:\n%s\n--- source\n%s", what, kn->name,
             err ? err : "", kn->source);
      free(err);
      ok = false;
      break;
    }
    int64_t v;
    if (kn->cond && (!rxk_eval(kn->cond, &env, &v) || !v)) {
      simt_module_free(mod);
      continue;
    }
    unsigned grid[3], block[3];
    for (int a = 0; a < 3; a++) {
      if (!rxk_eval(kn->grid[a], &env, &v)) {
        FAIL("%s: grid not evaluable", what);
        ok = false;
      }
      grid[a] = (unsigned)v;
      block[a] = (unsigned)kn->block[a];
    }
    void *args[NB + 16], *ptrs[NB + 16];
    int32_t scalars[NB + 16];
    unsigned char params[64] = {0};
    int nargs = 0;
    for (int a = 0; a < kn->nargs && ok; a++) {
      const rx_karg *ka = &kn->args[a];
      if (ka->kind == RX_KARG_BUFFER) {
        ptrs[a] = bufs[ka->param];
        args[nargs++] = metal ? ptrs[a] : (void *)&ptrs[a];
      } else {
        RX_ASSERT(a < NB + 16 && ka->offset + 4 <= (int)sizeof params);
        if (!rxk_eval(ka->var, &env, &v)) FAIL("%s: scalar %s not evaluable", what, ka->name);
        scalars[a] = (int32_t)v;
        if (metal)
          memcpy(params + ka->offset, &scalars[a], 4);
        else
          args[nargs++] = &scalars[a];
      }
    }
    if (metal && kn->scalar_bytes > 0) args[nargs++] = params;
    simt_kernel *sk = simt_module_kernel(mod, kn->name);
    if (!sk) {
      FAIL("%s: kernel '%s' not found in its object", what, kn->name);
      ok = false;
    } else if (ok && simt_launch(sk, grid, block, 0, args, nargs, &err)) {
      FAIL("%s: %s: launch failed: %s", what, kn->name, err);
      free(err);
      ok = false;
    }
    simt_module_free(mod);
  }
  int wrong = 0;
  for (int i = 0; i < D0 && ok; i++)
    for (int j = 0; j < D1; j++) {
      float got = bufs[NB][i * D1 + j], want = want_at(i, j);
      if (fabsf(got - want) > 1e-4f * fmaxf(1.0f, fabsf(want)) && wrong++ < 3)
        FAIL("%s: y[%d, %d] = %g, expected %g", what, i, j, got, want);
    }
  if (ok && !wrong) passed++;
  for (int b = 0; b <= NB; b++) free(bufs[b]);
}

static void check_cuda(const rx_kernel_list *kl, const char *arch, const char *what) {
  static int state; /* 0 unknown, 1 present, -1 absent */
  if (!state) {
    int mj, mn;
    rx_status s = tgt_nvrtc_load(&mj, &mn);
    state = s ? -1 : 1;
    if (s) printf("  NVRTC absent, CUDA compilation skipped: %s\n", rx_status_message(s));
    rx_status_free(s);
  }
  for (int k = 0; k < kl->n; k++) {
    if (state < 0) {
      skipped++;
      continue;
    }
    const rx_kernel *kn = kl->kernels[k];
    char *ptx = NULL, *log = NULL;
    size_t len = 0;
    rx_status s = tgt_nvrtc_compile(kn->source, kn->name, arch, false, &ptx, &len, &log);
    if (s)
      FAIL("%s: NVRTC %s: %s\n%s\n--- source\n%s", what, arch, rx_status_message(s), log ? log : "",
           kn->source);
    else
      passed++;
    rx_status_free(s);
    free(ptx);
    free(log);
  }
}

static void check_spirv(const rx_kernel_list *kl, const char *what) {
  for (int k = 0; k < kl->n; k++) {
    const rx_kernel *kn = kl->kernels[k];
    if (!tgt_shaderc_available() || !tgt_spirv_tools_available()) {
      skipped++;
    } else if (!kn->spirv) {
      FAIL("%s: no SPIR-V although shaderc is present", what);
    } else {
      rx_status s = tgt_spirv_validate(kn->spirv, kn->spirv_words);
      if (s)
        FAIL("%s: spirv-val: %s\n--- source\n%s", what, rx_status_message(s), kn->source);
      else
        passed++;
      rx_status_free(s);
    }
  }
}

/* kernels.json keeps the user's names beside the identifiers. */
static void check_json(const rx_target *t, const rx_tensor_fn *f, const rx_kernel_list *kl,
                       const prog *g, const char *what) {
  const cg_lang *L = cg_lang_of(cg_lang_of_target(t));
  rx_arena arena = {0};
  rx_strbuf j = {0}, want = {0};
  const rx_kernel_list *lists[1] = {kl};
  cg_kernels_json(&j, t, &f, lists, 1);
  const rx_kernel *k0 = kl->kernels[0];
  bool ok = !strcmp(k0->source_name, g->name) && !strcmp(k0->name, cg_ident(L, &arena, g->name));
  base_strbuf_printf(&want, "\"name\": \"%s\", \"source_name\": \"%s\"", k0->name, g->name);
  ok = ok && strstr(j.data, want.data);
  for (int a = 0; a < k0->nargs && ok; a++) {
    base_strbuf_free(&want);
    base_strbuf_printf(&want, "\"name\": \"%s\", \"ident\": \"%s\"", k0->args[a].name,
                       cg_ident(L, &arena, k0->args[a].name));
    ok = strstr(j.data, want.data) != NULL;
  }
  if (!ok)
    FAIL("%s: kernels.json lacks %s\n%s", what, want.data, j.data);
  else
    passed++;
  base_strbuf_free(&j);
  base_strbuf_free(&want);
  base_arena_free(&arena);
}

static void check_programs(void) {
  rx_ptrvec all = {0};
  all_words(&all);
  const char **W = base_calloc(all.len + 1, sizeof *W);
  size_t n = 0;
  for (size_t i = 0; i < all.len; i++)
    if (!rx_word(all.data[i])) W[n++] = all.data[i];
  size_t P = (n + NB - 1) / NB;
  prog *g = base_calloc(P, sizeof *g);
  rx_strbuf text = {0};
  for (size_t p = 0; p < P; p++) {
    make_prog(&g[p], W, n, p, P);
    print_prog(&text, &g[p]);
  }
  printf("%zu words (%zu .rx keywords left out), %zu programs\n", n, all.len - n, P);
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  if (!ir_parse_module(m, "reserved.rx", text.data, text.len, &diag) ||
      !ops_module_normalize(m, &diag) || !ir_module_verify(m, &diag)) {
    FAIL("the generated module does not check:\n%s", rx_diag_text(&diag));
  } else {
    static const char *targets[] = {"cuda -arch=sm_80", "vulkan-lavapipe", "metal-apple7"};
    for (size_t p = 0; p < P; p++) {
      const rx_tensor_fn *f = ir_module_tensor_fn(m, g[p].name);
      RX_ASSERT(f);
      for (size_t ti = 0; ti < RX_ARRAY_LEN(targets); ti++) {
        const rx_target *t;
        rx_status ts = tgt_target_parse(targets[ti], &t);
        RX_ASSERT(!ts);
        char what[256];
        snprintf(what, sizeof what, "program '%s' [%s]", f->name, t->name);
        rx_sched_result sr;
        rx_kernel_list kl;
        rx_diag d;
        base_diag_init(&d);
        bool built = sched_schedule(m, f, t, &d, &sr) && rxk_codegen(m, sr.fn, t, &d, &kl);
        if (!built) FAIL("%s: %s", what, rx_diag_text(&d));
        base_diag_free(&d);
        if (!built) continue;
        check_json(t, f, &kl, &g[p], what);
        if (t->kind == RX_TARGET_CUDA) check_cuda(&kl, t->cuda_arch, what);
        if (t->kind == RX_TARGET_VULKAN) check_spirv(&kl, what);
        if (t->kind != RX_TARGET_VULKAN) run_emulated(f, &kl, what);
      }
    }
  }
  base_diag_free(&diag);
  rx_module_free(m);
  base_strbuf_free(&text);
  free(g);
  free(W);
  base_ptrvec_free(&all);
}

int main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  setvbuf(stdout, NULL, _IOLBF, 0);
  check_mangler();
  check_programs();
  printf("identifiers: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
