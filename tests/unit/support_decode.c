#include "support_decode.h"

#include "frontends/hf/hf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *rxd_role_name(rxd_role r) {
  static const char *const names[] = {
#define X(e, n) n,
      RXD_ROLES(X)
#undef X
  };
  return (unsigned)r < RXD_ROLE_COUNT ? names[r] : "?";
}

/* Llama-2-7B and Llama-3-8B, one layer (every layer's kernels are the same). */
const rxd_shape rxd_shapes[] = {
    {"llama2-7b",
     "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, \"intermediate_size\": "
     "11008, \"num_hidden_layers\": 1, \"num_attention_heads\": 32, \"num_key_value_heads\": 32, "
     "\"vocab_size\": 32000, \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-5, "
     "\"hidden_act\": \"silu\", \"torch_dtype\": \"float16\"}",
     4096, 11008, 32, 32, 128, 4096},
    {"llama3-8b",
     "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, \"intermediate_size\": "
     "14336, \"num_hidden_layers\": 1, \"num_attention_heads\": 32, \"num_key_value_heads\": 8, "
     "\"vocab_size\": 128256, \"max_position_embeddings\": 8192, \"rms_norm_eps\": 1e-5, "
     "\"rope_theta\": 500000.0, \"hidden_act\": \"silu\", \"torch_dtype\": \"float16\"}",
     4096, 14336, 32, 8, 128, 8192},
};
const int rxd_nshapes = (int)RX_ARRAY_LEN(rxd_shapes);

/* Llama-2-7B as the checkpoints users download it quantized (issue 32): AutoAWQ's GEMM layout in
 * groups of 128 and GPTQ's v2 format with act-order (g_idx), one layer; their GEMVs read int32
 * words (ops/quant.c). */
#define LLAMA2_7B_BODY                                                                             \
  "\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 4096, \"intermediate_size\": "      \
  "11008, \"num_hidden_layers\": 1, \"num_attention_heads\": 32, \"num_key_value_heads\": 32, "    \
  "\"vocab_size\": 32000, \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-5, "             \
  "\"hidden_act\": \"silu\", \"torch_dtype\": \"float16\""
const rxd_shape rxd_quant_shapes[] = {
    {"llama2-7b-awq_g128",
     "{" LLAMA2_7B_BODY ", \"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4, "
     "\"group_size\": 128, \"version\": \"gemm\", \"zero_point\": true}}",
     4096, 11008, 32, 32, 128, 4096},
    {"llama2-7b-gptq_v2",
     "{" LLAMA2_7B_BODY ", \"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, "
     "\"group_size\": 128, \"desc_act\": true, \"sym\": false, \"checkpoint_format\": "
     "\"gptq_v2\"}}",
     4096, 11008, 32, 32, 128, 4096},
};
const int rxd_nquant_shapes = (int)RX_ARRAY_LEN(rxd_quant_shapes);

/* The KV cache's page (frontends/hf: pages of 16 tokens). */
#define CACHE_PAGE_TOKENS 16
/* A weight matrix: a 2-D f16 parameter of at least this many elements (4096 x 256), or a 2-D
 * int32 one of at least an eighth of them (AWQ's and GPTQ's words: 8 weights each). */
#define WEIGHT_MIN_ELEMS (1 << 20)

void rxd_env(const rxd_shape *s, const rx_tensor_fn *f, rxk_env *out) {
  rxk_program_vars(f, out);
  for (int i = 0; i < out->n; i++) {
    const char *v = out->vars[i]->name;
    out->values[i] = !strcmp(v, "mp") || !strcmp(v, "pages") ? s->max_pos / CACHE_PAGE_TOKENS
                     : !strcmp(v, "m")                       ? s->max_pos
                                                             : 1;
  }
}

/* ---- roles ---- */
typedef struct facts {
  bool reduce, max_reduce, rsqrt, sigmoid, exp_, weight;
} facts;

static void tx_facts(const rx_tx *e, facts *f) {
  if (!e) return;
  if (e->kind == RX_TX_CALL) {
    f->rsqrt |= e->intrin == RX_INTRIN_RSQRT;
    f->sigmoid |= e->intrin == RX_INTRIN_SIGMOID;
    f->exp_ |= e->intrin == RX_INTRIN_EXP || e->intrin == RX_INTRIN_EXP2;
  }
  for (int i = 0; i < e->nidx; i++) tx_facts(e->idx[i], f);
  tx_facts(e->a, f);
  tx_facts(e->b, f);
  tx_facts(e->c, f);
}

static void stmt_facts(const rx_stmt *s, facts *f) {
  if (!s) return;
  if (s->kind == RX_STMT_REDUCE) {
    f->reduce = true;
    const rx_stmt *u = s->inner;
    while (u && u->kind == RX_STMT_SEQ && u->n > 0) u = u->body[u->n - 1];
    if (u && u->kind == RX_STMT_STORE && u->value->kind == RX_TX_CALL &&
        u->value->intrin == RX_INTRIN_MAX)
      f->max_reduce = true;
  }
  for (int i = 0; i < s->n; i++) stmt_facts(s->body[i], f);
  for (int i = 0; i < s->nidx; i++) tx_facts(s->idx[i], f);
  tx_facts(s->value, f);
  stmt_facts(s->inner, f);
  stmt_facts(s->init, f);
  stmt_facts(s->otherwise, f);
}

static bool classify(const rx_tensor_fn *f, rxd_role *out) {
  if (!strncmp(f->name, "paged_decode_attention", 22) || !strncmp(f->name, "attention_merge", 15)) {
    *out = RXD_ATTENTION;
    return true;
  }
  facts x = {0};
  stmt_facts(f->body, &x);
  for (int i = 0; i < f->nparams; i++) {
    const rx_param *p = f->params[i];
    if (p->kind != RX_PARAM_BUFFER || p->buf->ndim != 2) continue;
    int per = p->buf->dtype == RX_DTYPE_F16 ? 1 : p->buf->dtype == RX_DTYPE_I32 ? 8 : 0;
    const rx_expr *d0 = p->buf->shape[0], *d1 = p->buf->shape[1];
    if (per && d0->kind == RX_EXPR_CONST && d1->kind == RX_EXPR_CONST &&
        d0->value * d1->value * per >= WEIGHT_MIN_ELEMS)
      x.weight = true;
  }
  if (x.reduce && x.weight)
    *out = RXD_GEMV;
  else if (x.rsqrt && x.reduce)
    *out = RXD_RMS_NORM;
  else if (x.sigmoid && !x.weight && !x.reduce)
    *out = RXD_SILU_MUL;
  else if (x.exp_ && x.max_reduce)
    *out = RXD_SOFTMAX;
  else
    return false;
  return true;
}

/* ---- building ---- */
static void collect_calls(const rx_seq *q, rx_ptrvec *out) {
  for (int b = 0; q && b < q->nblocks; b++) {
    for (int i = 0; i < q->blocks[b]->nbindings; i++) {
      const rx_node *v = q->blocks[b]->bindings[i]->value;
      if (v->kind == RX_NODE_CALL_TENSOR && v->tfn) base_ptrvec_push(out, v->tfn);
      if (v->kind == RX_NODE_IF) {
        collect_calls(v->then_seq, out);
        collect_calls(v->else_seq, out);
      }
    }
  }
}

/* The kernels of every program called from graph function fname (NULL: every program) that has
 * a role, appended to md. */
static void add_kernels(rxd_model *md, int which, const char *fname) {
  rx_module *m = md->m[which];
  rx_ptrvec called = {0};
  for (size_t i = 0; i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_GRAPH) continue;
    const rx_graph_fn *g = m->items.data[i].fn;
    if (!fname || !strcmp(g->name, fname)) collect_calls(&g->body, &called);
  }
  const rx_target_output *to = &md->r[which].targets[0];
  int pi = 0;
  for (size_t i = 0; i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_TENSOR) continue;
    const rx_tensor_fn *f = m->items.data[i].fn;
    int at = pi++;
    bool is_called = false;
    for (size_t c = 0; c < called.len; c++) is_called |= called.data[c] == f;
    rxd_role role;
    if (!is_called || at >= to->nprograms || !classify(f, &role)) continue;
    const rx_kernel_list *kl = to->kernels[at];
    rxk_env env;
    rxd_env(md->shape, f, &env);
    for (int k = 0; k < kl->n; k++) {
      int64_t runs = 1;
      if (kl->kernels[k]->cond && rxk_eval(kl->kernels[k]->cond, &env, &runs) && !runs) continue;
      md->k = realloc(md->k, sizeof *md->k * (size_t)(md->n + 1));
      if (!md->k) abort();
      md->k[md->n++] = (rxd_kernel){role, f, kl->kernels[k], env};
    }
  }
  base_ptrvec_free(&called);
}

static bool compile(rxd_model *md, int which, const char *target, char *why, size_t n) {
  rx_compile_options o = {.ntargets = 1, .no_nvrtc = true};
  o.cache = rxk_kcache(); /* support_kcache.c */
  rx_status s = tgt_target_parse(target, &o.targets[0]);
  if (s) {
    snprintf(why, n, "target %s: %s", target, rx_status_message(s));
    rx_status_free(s);
    return false;
  }
  rx_diag d;
  base_diag_init(&d);
  bool ok = drv_compile(md->m[which], &o, &d, &md->r[which]);
  if (!ok) snprintf(why, n, "%s: compile: %s", md->shape->name, rx_diag_text(&d));
  base_diag_free(&d);
  return ok;
}

/* silu(g) * u at the model's intermediate width, a softmax over a cache row of every head, and
 * the RMSNorm of the f32 residual stream rounded to f16: kernels a decode step folds into others
 * (the gate/up GEMV's epilogue; rms_norm_matmul) but prefill and artifacts of more than 16
 * sequences run on their own. */
static bool build_ops(rxd_model *md, const char *target, char *why, size_t n) {
  const rxd_shape *s = md->shape;
  char text[2048];
  snprintf(text, sizeof text,
           "graph_fn ops(g: f16[b, %d], u: f16[b, %d], sc: f16[b, %d, m], x: f32[b, %d], "
           "w: f32[%d]) -> (f16[b, %d], f16[b, %d, m], f16[b, %d]) where 1 <= b, b <= 16, "
           "1 <= m, m <= %d {\n"
           "  dataflow {\n    h = multiply(silu(g), u)\n    p = softmax(sc, axis=-1)\n"
           "    r = rms_norm(x, w, axes=[-1], epsilon=1e-05, dtype=f16)\n  }\n"
           "  return (h, p, r)\n}\n",
           s->intermediate, s->intermediate, s->heads, s->hidden, s->hidden, s->intermediate,
           s->heads, s->hidden, s->max_pos);
  md->m[1] = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  bool ok = ir_parse_module(md->m[1], "ops.rx", text, strlen(text), &d);
  if (!ok) snprintf(why, n, "ops module: %s", rx_diag_text(&d));
  base_diag_free(&d);
  if (!ok) return false;
  if (!compile(md, 1, target, why, n)) return false;
  add_kernels(md, 1, NULL);
  return true;
}

bool rxd_model_build(rxd_model *md, const rxd_shape *s, const char *target, const char *tmpdir,
                     char *why, size_t n) {
  memset(md, 0, sizeof *md);
  md->shape = s;
  char dir[1024], path[1100];
  snprintf(dir, sizeof dir, "%s/%s", tmpdir, s->name);
  mkdir(tmpdir, 0755);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *fp = fopen(path, "w");
  if (!fp || fputs(s->config, fp) < 0 || fclose(fp) != 0) {
    snprintf(why, n, "cannot write %s", path);
    return false;
  }
  md->m[0] = rx_module_new();
  rx_hf_options ho = {.dtype = RX_DTYPE_F16, .no_weights = true};
  rx_status st = hf_import(md->m[0], dir, &ho);
  unlink(path);
  rmdir(dir);
  if (st) {
    snprintf(why, n, "%s: import: %s", s->name, rx_status_message(st));
    rx_status_free(st);
    return false;
  }
  if (!compile(md, 0, target, why, n)) return false;
  add_kernels(md, 0, "decode");
  if (!build_ops(md, target, why, n)) return false;
  for (int r = 0; r < RXD_ROLE_COUNT; r++) {
    bool found = false;
    for (int i = 0; i < md->n; i++) found |= md->k[i].role == (rxd_role)r;
    if (!found) {
      snprintf(why, n, "%s: no %s program found (the classification in support_decode.c broke)",
               s->name, rxd_role_name((rxd_role)r));
      return false;
    }
  }
  return true;
}

int rxd_for_each_kernel(int nshapes, const char *target, rxd_visit visit, void *ud) {
  return rxd_for_each_kernel_of(rxd_shapes, nshapes < rxd_nshapes ? nshapes : rxd_nshapes, target,
                                visit, ud);
}

int rxd_for_each_kernel_of(const rxd_shape *shapes, int nshapes, const char *target,
                           rxd_visit visit, void *ud) {
  char tmp[256];
  const char *t = getenv("TMPDIR");
  snprintf(tmp, sizeof tmp, "%s/relaxc-decode-%ld", t && *t ? t : "/tmp", (long)getpid());
  int bad = 0;
  for (int i = 0; i < nshapes; i++) {
    rxd_model md;
    char why[1024];
    if (!rxd_model_build(&md, &shapes[i], target, tmp, why, sizeof why)) {
      bad++;
      fprintf(stderr, "FAIL: %s\n", why);
    } else {
      printf("%s: %d decode kernels with a role\n", shapes[i].name, md.n);
      for (int k = 0; k < md.n; k++) visit(&shapes[i], &md.k[k], ud);
    }
    rxd_model_free(&md);
  }
  rmdir(tmp);
  return bad;
}

void rxd_model_free(rxd_model *md) {
  for (int i = 0; i < 2; i++) {
    drv_compile_result_free(&md->r[i]);
    if (md->m[i]) rx_module_free(md->m[i]);
  }
  free(md->k);
  memset(md, 0, sizeof *md);
}
