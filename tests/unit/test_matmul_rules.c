/* Every matmul of an LLM decoder reaches a matmul rule (issue 13): a fused matmul (an epilogue
 * with a bias, the residual, a cast, the silu of the gate times the up projection; a prologue in
 * its operands) must never fall to the row-reduction or fallback rule.
 *
 * Models: every folder of tests/llm/models (Llama with MHA and GQA, Llama 3, Mistral, Qwen2 with
 * q/k/v biases) and Llama-2-7B- and Llama-3-8B-shaped configs (one layer each), imported from
 * their config.json alone (the weights stay parameters; the shapes are the model's) in f16 with
 * the Hugging Face layout (weights [out, in], read as x @ W^T), compiled with fusion: prefill
 * and decode. Every tensor program of the compiled module (fused, unscheduled) that contains a
 * matmul-shaped reduction is then scheduled for cuda, vulkan (the specification's minimum: no
 * subgroups), vulkan-lavapipe and metal, and each of its variants must be GEMV or GEMM. The
 * detector is independent of the rule's matcher: a sum reduction whose update adds a product of
 * two factors that both load with the reduction variable and differ (x * x of a norm is not a
 * matmul). Programs that arrive scheduled (the attention kernels bind their own loops) are not
 * the rule table's to place and are skipped, and so are reductions of fewer than MIN_MATMUL_K
 * terms (a weighted sum). A model where no matmul is found fails too.
 *
 * A checkpoint's int32 words dequantized in the matmul (AWQ's and GPTQ's qweight, tiny-llama-awq
 * and tiny-llama-gptq; issue 32) must moreover reach the matrix units on cuda sm_80 in prefill:
 * the variant past the small-row kernels is gemm_mma_dq (passes/schedule/gemm_mma.c's stage with
 * its lanes along the columns), the one below it gemm_mma_dq_64.
 *
 * A failure names the model, the target, the program, its rule and the product.
 *
 * usage: test_matmul_rules TESTS_DIR */
#include "base/base.h"
#include "driver/driver.h"
#include "frontends/hf/hf.h"
#include "passes/schedule.h"
#include "targets/target.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int passed, failed;

#define FAIL(...)                                                                                  \
  do {                                                                                             \
    failed++;                                                                                      \
    fprintf(stderr, "FAIL: " __VA_ARGS__);                                                         \
    fputc('\n', stderr);                                                                           \
  } while (0)

static const char *const targets[] = {"cuda -arch=sm_80", "vulkan", "vulkan-lavapipe",
                                      "metal-apple7"};

/* Llama-2-7B and Llama-3-8B shapes, one layer (the kernels of every layer are the same). */
static const struct {
  const char *name, *config;
} configs[] = {
    {"llama2-7b",
     "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, \"intermediate_size\": "
     "11008, \"num_hidden_layers\": 1, \"num_attention_heads\": 32, \"num_key_value_heads\": 32, "
     "\"vocab_size\": 32000, \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-5, "
     "\"hidden_act\": \"silu\", \"torch_dtype\": \"float16\"}"},
    {"llama3-8b",
     "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, \"intermediate_size\": "
     "14336, \"num_hidden_layers\": 1, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, "
     "\"vocab_size\": 128256, \"max_position_embeddings\": 8192, \"rms_norm_eps\": 1e-5, "
     "\"rope_theta\": 500000.0, \"hidden_act\": \"silu\", \"torch_dtype\": \"float16\"}"},
};

/* ---- the detector ---- */
#define MAX_FACTORS 16
#define MAX_LETS    32

typedef struct lets {
  const rx_local *l[MAX_LETS];
  const rx_tx *v[MAX_LETS];
  int n;
} lets;

static const rx_tx *resolve(const rx_tx *e, const lets *ls) {
  for (int i = ls->n; e && e->kind == RX_TX_LOCAL && i-- > 0;)
    if (ls->l[i] == e->local) return resolve(ls->v[i], ls);
  return e;
}

static bool uses(const rx_tx *e, const rx_expr *k, const lets *ls) {
  e = resolve(e, ls);
  if (!e) return false;
  if (e->kind == RX_TX_SYM) return sym_expr_uses_var(e->sym, k);
  for (int i = 0; i < e->nidx; i++)
    if (uses(e->idx[i], k, ls)) return true;
  return uses(e->a, k, ls) || uses(e->b, k, ls) || uses(e->c, k, ls);
}

/* A load that uses k anywhere in e. */
static bool loads_with(const rx_tx *e, const rx_expr *k, const lets *ls) {
  e = resolve(e, ls);
  if (!e) return false;
  if (e->kind == RX_TX_LOAD) {
    for (int i = 0; i < e->nidx; i++)
      if (uses(e->idx[i], k, ls)) return true;
  }
  for (int i = 0; i < e->nidx; i++)
    if (loads_with(e->idx[i], k, ls)) return true;
  return loads_with(e->a, k, ls) || loads_with(e->b, k, ls) || loads_with(e->c, k, ls);
}

static bool same(const rx_tx *a, const rx_tx *b, const lets *ls) {
  a = resolve(a, ls);
  b = resolve(b, ls);
  if (!a || !b) return a == b;
  if (a->kind != b->kind || a->dtype != b->dtype || a->nidx != b->nidx) return false;
  switch (a->kind) {
  case RX_TX_SYM:
    return a->sym == b->sym;
  case RX_TX_INT:
    return a->ival == b->ival;
  case RX_TX_FLOAT:
    return a->fval == b->fval;
  case RX_TX_LOAD:
    if (a->buf != b->buf) return false;
    break;
  case RX_TX_BINARY:
    if (a->binop != b->binop) return false;
    break;
  case RX_TX_CALL:
    if (a->intrin != b->intrin) return false;
    break;
  default:
    break;
  }
  for (int i = 0; i < a->nidx; i++)
    if (!same(a->idx[i], b->idx[i], ls)) return false;
  return same(a->a, b->a, ls) && same(a->b, b->b, ls) && same(a->c, b->c, ls);
}

/* The factors of a product (through casts). */
static void factors(const rx_tx *e, const lets *ls, const rx_tx **out, int *n) {
  e = resolve(e, ls);
  while (e && e->kind == RX_TX_CAST) e = resolve(e->a, ls);
  if (e && e->kind == RX_TX_BINARY && e->binop == RX_BINOP_MUL) {
    factors(e->a, ls, out, n);
    factors(e->b, ls, out, n);
  } else if (*n < MAX_FACTORS) {
    out[(*n)++] = e;
  }
}

/* The update's lets into ls, and its store. */
static const rx_stmt *update_store(const rx_stmt *r, lets *ls) {
  const rx_stmt *up = r->inner, *store = NULL;
  for (int i = 0; up && i < (up->kind == RX_STMT_SEQ ? up->n : 1); i++) {
    const rx_stmt *st = up->kind == RX_STMT_SEQ ? up->body[i] : up;
    if (st->kind == RX_STMT_LET && ls->n < MAX_LETS) {
      ls->l[ls->n] = st->local;
      ls->v[ls->n++] = st->value;
    } else if (st->kind == RX_STMT_STORE) {
      store = st;
    }
  }
  return store;
}

/* A reduction over fewer terms than this is a weighted sum, not a matmul (a mixture of experts'
 * combine over each token's top-k slots: k = 2): no matmul rule has anything to tile there, and
 * its outputs are read and written along the row by the elementwise schedule. */
#define MIN_MATMUL_K 8

/* The reduce's update adds a product of two different factors that load with its variable. */
static bool matmul_reduce(const rx_stmt *r) {
  lets ls = {.n = 0};
  const rx_stmt *store = update_store(r, &ls);
  if (!store || r->nvars != 1 || store->value->kind != RX_TX_BINARY ||
      store->value->binop != RX_BINOP_ADD)
    return false;
  if (r->extent[0]->kind == RX_EXPR_CONST && r->extent[0]->value < MIN_MATMUL_K) return false;
  const rx_expr *k = r->vars[0];
  for (int side = 0; side < 2; side++) {
    const rx_tx *fs[MAX_FACTORS];
    int n = 0;
    factors(side ? store->value->b : store->value->a, &ls, fs, &n);
    for (int a = 0; a < n; a++)
      for (int b = a + 1; b < n; b++)
        if (loads_with(fs[a], k, &ls) && loads_with(fs[b], k, &ls) && !same(fs[a], fs[b], &ls))
          return true;
  }
  return false;
}

/* The reduce's update loads an int32 buffer with its variable (a checkpoint's packed words). */
static bool words_with(const rx_tx *e, const rx_expr *k, const lets *ls) {
  e = resolve(e, ls);
  if (!e) return false;
  if (e->kind == RX_TX_LOAD && e->dtype == RX_DTYPE_I32)
    for (int i = 0; i < e->nidx; i++)
      if (uses(e->idx[i], k, ls)) return true;
  for (int i = 0; i < e->nidx; i++)
    if (words_with(e->idx[i], k, ls)) return true;
  return words_with(e->a, k, ls) || words_with(e->b, k, ls) || words_with(e->c, k, ls);
}

static bool words_reduce(const rx_stmt *r) {
  lets ls = {.n = 0};
  const rx_stmt *store = update_store(r, &ls);
  return store && r->nvars == 1 && words_with(store->value, r->vars[0], &ls);
}

/* On cuda sm_80 (targets[0]) a program of dequantized int32 words ends with the variants
 * gemm_mma_dq_64 and gemm_mma_dq (prefill on the matrix units). */
static bool words_on_mma(const char *model, const rx_tensor_fn *f, const rx_sched_result *res) {
  int nv = res->nvariants;
  const char *got = nv >= 2 ? res->variants[nv - 1].name : NULL;
  const char *mid = nv >= 2 ? res->variants[nv - 2].name : NULL;
  if (got && mid && !strcmp(got, "gemm_mma_dq") && !strcmp(mid, "gemm_mma_dq_64")) return true;
  FAIL("%s, %s: program %s dequantizes int32 words; its last variants are %s and %s, want "
       "gemm_mma_dq_64 and gemm_mma_dq",
       model, targets[0], f->name, mid ? mid : "(none)", got ? got : "(none)");
  return false;
}

/* The first matmul-shaped reduce in s, or NULL; *bound: s binds loops (scheduled by hand). */
static const rx_stmt *find_matmul(const rx_stmt *s, bool *bound) {
  if (!s) return NULL;
  if (s->kind == RX_STMT_FOR && s->loop_kind >= RX_LOOP_BLOCK_X) *bound = true;
  if (s->kind == RX_STMT_REDUCE && matmul_reduce(s)) return s;
  const rx_stmt *r = NULL;
  for (int i = 0; i < s->n && !r; i++) r = find_matmul(s->body[i], bound);
  if (!r) r = find_matmul(s->inner, bound);
  if (!r) r = find_matmul(s->init, bound);
  if (!r) r = find_matmul(s->otherwise, bound);
  return r;
}

/* ---- the check ---- */
static void check_program(const char *model, rx_module *m, const rx_tensor_fn *f, int *nmatmuls,
                          int *nwords) {
  bool bound = false;
  const rx_stmt *red = find_matmul(f->body, &bound);
  if (!red || bound) return;
  ++*nmatmuls;
  if (words_reduce(red)) ++*nwords;
  for (size_t t = 0; t < RX_ARRAY_LEN(targets); t++) {
    const rx_target *tg;
    rx_status s = tgt_target_parse(targets[t], &tg);
    RX_ASSERT(!s);
    rx_diag d;
    base_diag_init(&d);
    rx_sched_result res;
    if (!sched_schedule(m, f, tg, &d, &res)) {
      FAIL("%s, %s: %s is not scheduled:\n%s", model, targets[t], f->name, rx_diag_text(&d));
      base_diag_free(&d);
      continue;
    }
    base_diag_free(&d);
    bool ok = true;
    for (int v = 0; v < res.nvariants; v++) {
      rx_sched_rule r = res.variants[v].rule;
      if (r == RX_SCHED_GEMV || r == RX_SCHED_GEMM) continue;
      rx_strbuf b = {0};
      lets ls = {.n = 0};
      ir_tx_print(&b, update_store(red, &ls)->value);
      FAIL("%s, %s: program %s (a matmul: %s) is scheduled by rule %s", model, targets[t], f->name,
           b.data ? b.data : "?", sched_rule_name(r));
      base_strbuf_free(&b);
      ok = false;
      break;
    }
    if (ok && t == 0 && words_reduce(red)) ok = words_on_mma(model, f, &res);
    if (ok) passed++;
  }
}

/* Imports the model folder dir (config.json alone) and checks every program. */
static void check_model(const char *name, const char *dir) {
  rx_module *m = rx_module_new();
  rx_hf_options ho = {.dtype = RX_DTYPE_F16, .no_weights = true};
  rx_status s = hf_import(m, dir, &ho);
  if (s) {
    FAIL("%s: import: %s", name, rx_status_message(s));
    rx_status_free(s);
    rx_module_free(m);
    return;
  }
  rx_compile_options o = {.ntargets = 1, .no_nvrtc = true};
  s = tgt_target_parse("cuda", &o.targets[0]);
  RX_ASSERT(!s);
  rx_compile_result r;
  memset(&r, 0, sizeof r);
  rx_diag diag;
  base_diag_init(&diag);
  if (!drv_compile(m, &o, &diag, &r)) {
    FAIL("%s: compile: %s", name, rx_diag_text(&diag));
  } else {
    int n = 0, programs = 0, words = 0;
    for (size_t i = 0; i < m->items.len; i++) {
      if (m->items.data[i].kind != RX_ITEM_TENSOR) continue;
      programs++;
      check_program(name, m, m->items.data[i].fn, &n, &words);
    }
    printf("%s: %d programs, %d with a matmul, %d of int32 words\n", name, programs, n, words);
    if (words == 0 && (strstr(name, "awq") || strstr(name, "gptq")))
      FAIL("%s: no matmul of int32 words found (the detector is broken)", name);
    if (n == 0)
      FAIL("%s: no matmul found among %d programs (the detector is broken)", name, programs);
  }
  drv_compile_result_free(&r);
  base_diag_free(&diag);
  rx_module_free(m);
}

static bool write_config(const char *dir, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *fp = fopen(path, "w");
  if (!fp) return false;
  bool ok = fputs(text, fp) >= 0;
  return fclose(fp) == 0 && ok;
}

int main(int argc, char **argv) {
  const char *tests = argc > 1 ? argv[1] : "tests";
  setvbuf(stdout, NULL, _IOLBF, 0);
  char mdir[1024];
  snprintf(mdir, sizeof mdir, "%s/llm/models", tests);
  DIR *d = opendir(mdir);
  if (!d) {
    FAIL("cannot open %s", mdir);
  } else {
    char *names[64];
    int nn = 0;
    for (struct dirent *de; (de = readdir(d)) && nn < 64;)
      if (de->d_name[0] != '.') names[nn++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < nn; i++) {
      char dir[1300];
      snprintf(dir, sizeof dir, "%s/%s", mdir, names[i]);
      if (hf_is_model_dir(dir)) check_model(names[i], dir);
      free(names[i]);
    }
  }
  for (size_t c = 0; c < RX_ARRAY_LEN(configs); c++) {
    char dir[] = "/tmp/rx_matmul_rules_XXXXXX";
    if (!mkdtemp(dir)) {
      FAIL("mkdtemp");
      continue;
    }
    if (write_config(dir, configs[c].config))
      check_model(configs[c].name, dir);
    else
      FAIL("%s: cannot write %s/config.json", configs[c].name, dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    remove(path);
    rmdir(dir);
  }
  printf("matmul rules: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
