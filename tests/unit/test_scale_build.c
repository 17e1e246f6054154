/* The builder path at scale (issue 29, item 7): an ONNX chain of 100,000 nodes, written here in
 * memory, is imported and compiled; a Hugging Face config of 1,000 layers (config.json alone,
 * no weights) is imported and compiled. Not timed: the ctest TIMEOUT (tests/CMakeLists.txt) fails
 * it if a step turns quadratic again. Before the fix a 4,000-node chain took 9 s to import
 * (fresh names: each try scanned every variable, so 100k nodes took hours) and 250 layers took
 * 19 s of CPU to compile (fuse_ops' unique names: each try scanned every function); now the
 * chain takes about a second and the 1,000 layers a few (RelWithDebInfo).
 *
 * usage: test_scale_build [TESTS_DIR] [NODES] [LAYERS] */
#include "check.h"
#include "driver/driver.h"
#include "frontends/hf/hf.h"
#include "frontends/onnx/onnx_import.h"
#include "ir/ir.h"
#include "targets/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- protobuf, written by hand (onnx.proto's field numbers) ---- */
static void varint(rx_strbuf *b, uint64_t v) {
  do {
    char c = (char)(v & 0x7f);
    v >>= 7;
    if (v) c = (char)(c | 0x80);
    base_strbuf_appendn(b, &c, 1);
  } while (v);
}
/* A length-delimited field: its tag, the payload's length, the payload. */
static void ld(rx_strbuf *b, int field, const char *p, size_t n) {
  varint(b, (uint64_t)field << 3 | 2);
  varint(b, n);
  base_strbuf_appendn(b, p, n);
}
static void ld_buf(rx_strbuf *b, int field, rx_strbuf *p) {
  ld(b, field, p->data ? p->data : "", p->len);
  base_strbuf_free(p);
}
static void ld_str(rx_strbuf *b, int field, const char *s) { ld(b, field, s, strlen(s)); }
static void vi(rx_strbuf *b, int field, uint64_t v) {
  varint(b, (uint64_t)field << 3);
  varint(b, v);
}

/* ValueInfoProto `name`: float [N, 16] (N symbolic). */
static void value_info(rx_strbuf *g, int field, const char *name) {
  rx_strbuf dim_n = {0}, dim_16 = {0}, shape = {0}, tensor = {0}, type = {0}, vinfo = {0};
  ld_str(&dim_n, 2, "N");     /* Dimension.dim_param */
  vi(&dim_16, 1, 16);         /* Dimension.dim_value */
  ld_buf(&shape, 1, &dim_n);  /* TensorShapeProto.dim */
  ld_buf(&shape, 1, &dim_16); /* TensorShapeProto.dim */
  vi(&tensor, 1, 1);          /* Tensor.elem_type FLOAT */
  ld_buf(&tensor, 2, &shape); /* Tensor.shape */
  ld_buf(&type, 1, &tensor);  /* TypeProto.tensor_type */
  ld_str(&vinfo, 1, name);    /* ValueInfoProto.name */
  ld_buf(&vinfo, 2, &type);   /* ValueInfoProto.type */
  ld_buf(g, field, &vinfo);
}

/* x -> Relu -> Neg -> Abs -> Relu ... (n nodes) -> the output: every binding gets a fresh name
 * from one of three hints. */
static rx_strbuf chain_model(int n) {
  static const char *const ops[] = {"Relu", "Neg", "Abs"};
  rx_strbuf g = {0}, model = {0};
  ld_str(&g, 2, "chain"); /* GraphProto.name */
  char prev[32] = "x", out[32];
  for (int i = 0; i < n; i++) {
    snprintf(out, sizeof out, "t%d", i);
    rx_strbuf node = {0};
    ld_str(&node, 1, prev);       /* NodeProto.input */
    ld_str(&node, 2, out);        /* NodeProto.output */
    ld_str(&node, 4, ops[i % 3]); /* NodeProto.op_type */
    ld_buf(&g, 1, &node);         /* GraphProto.node */
    memcpy(prev, out, sizeof prev);
  }
  value_info(&g, 11, "x");  /* GraphProto.input */
  value_info(&g, 12, prev); /* GraphProto.output */
  rx_strbuf opset = {0};
  vi(&opset, 2, 17);         /* OperatorSetIdProto.version */
  vi(&model, 1, 8);          /* ModelProto.ir_version */
  ld_buf(&model, 7, &g);     /* ModelProto.graph */
  ld_buf(&model, 8, &opset); /* ModelProto.opset_import */
  return model;
}

static int count_bindings(const rx_graph_fn *f) {
  int n = 0;
  for (int b = 0; b < f->body.nblocks; b++) n += f->body.blocks[b]->nbindings;
  return n;
}

/* Compiles m for CUDA (sources only: no toolchain, so the test times the passes). */
static bool compile(rx_module *m, const char *what) {
  rx_compile_options o;
  memset(&o, 0, sizeof o);
  const rx_target *t = NULL;
  rx_status st = tgt_target_parse("cuda", &t);
  CHECK_MSG(!st, "%s", rx_status_message(st));
  rx_status_free(st);
  if (!t) return false;
  o.targets[0] = t;
  o.ntargets = 1;
  o.no_nvrtc = true;
  o.jobs = 1;
  rx_compile_result r;
  memset(&r, 0, sizeof r);
  rx_diag d;
  base_diag_init(&d);
  bool ok = drv_compile(m, &o, &d, &r);
  CHECK_MSG(ok, "%s: compile failed:\n%s", what, rx_diag_text(&d));
  CHECK_MSG(!ok || r.nfunctions >= 1, "%s: no function", what);
  drv_compile_result_free(&r);
  base_diag_free(&d);
  return ok;
}

static void test_onnx_chain(int n) {
  double t0 = now_s();
  rx_strbuf model = chain_model(n);
  rx_module *m = rx_module_new();
  rx_diag d;
  base_diag_init(&d);
  rx_status st = onnx_import(m, model.data, model.len, "chain.onnx", NULL, &d);
  CHECK_MSG(!st, "import of a %d-node chain: %s", n, rx_status_message(st));
  rx_status_free(st);
  double t1 = now_s();
  rx_graph_fn *f = st ? NULL : ir_module_graph_fn(m, "main");
  CHECK_MSG(st || f, "no main");
  if (f) {
    /* one binding per node, each with its own name */
    CHECK_MSG(count_bindings(f) >= n, "%d bindings for %d nodes", count_bindings(f), n);
    rx_strbuf out = {0};
    ir_module_print(&out, m);
    char want[64];
    snprintf(want, sizeof want, "relu%d: f32[N, 16] = relu(", n / 3 - 1);
    CHECK_MSG(strstr(out.data, want) != NULL, "no '%s' in the imported module", want);
    base_strbuf_free(&out);
    compile(m, "the ONNX chain");
  }
  printf("ONNX chain of %d nodes: imported in %.2f s, compiled in %.2f s\n", n, t1 - t0,
         now_s() - t1);
  base_diag_free(&d);
  rx_module_free(m);
  base_strbuf_free(&model);
}

static void test_hf_layers(int layers) {
  char dir[256], path[300];
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/rx_scale_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    CHECK_MSG(false, "mkdtemp %s", dir);
    return;
  }
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *fp = fopen(path, "w");
  bool written =
      fp && fprintf(fp,
                    "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, "
                    "\"intermediate_size\": 128, \"num_hidden_layers\": %d, "
                    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 256, "
                    "\"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-5, "
                    "\"hidden_act\": \"silu\", \"torch_dtype\": \"float16\"}",
                    layers) > 0;
  if (fp && fclose(fp) != 0) written = false;
  CHECK_MSG(written, "cannot write %s", path);
  double t0 = now_s(), t1 = t0;
  if (written) {
    rx_module *m = rx_module_new();
    rx_hf_options ho = {.dtype = RX_DTYPE_F16, .no_weights = true};
    rx_status st = hf_import(m, dir, &ho);
    CHECK_MSG(!st, "import of %d layers: %s", layers, rx_status_message(st));
    t1 = now_s();
    if (!st) compile(m, "the deep decoder");
    rx_status_free(st);
    rx_module_free(m);
  }
  printf("Hugging Face config of %d layers: built in %.2f s, compiled in %.2f s\n", layers, t1 - t0,
         now_s() - t1);
  remove(path);
  rmdir(dir);
}

int main(int argc, char **argv) {
  int nodes = argc > 2 ? atoi(argv[2]) : 100000;
  int layers = argc > 3 ? atoi(argv[3]) : 1000;
  test_onnx_chain(nodes < 3 ? 3 : nodes);
  test_hf_layers(layers < 1 ? 1 : layers);
  return check_finish("test_scale_build");
}
