/* relaxc: the command line. The table of commands below is the one list of commands and options:
 * the list printed by `relaxc`, each command's --help and the option parser are read from it
 * (tools/commands.h). check, print, ops and help are implemented here, the others in
 * tools/cmd_*.c. */
#include "commands.h"
#include "driver/driver.h"
#include "ir/ir.h"
#include "ops/ops.h"
#include "relaxc/compiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* exit statuses */
enum {
  EXIT_OK = 0,     /* success (warnings may have been printed) */
  EXIT_ERRORS = 1, /* errors in the input, or the input file cannot be read */
  EXIT_USAGE = 2,  /* bad command line */
};

static int cmd_check(const rx_cli_command *cmd, int argc, char **argv);
static int cmd_ops(const rx_cli_command *cmd, int argc, char **argv);
static int cmd_targets(const rx_cli_command *cmd, int argc, char **argv);
static int cmd_help(const rx_cli_command *cmd, int argc, char **argv);

static const rx_cli_flag no_flags[] = {{0}};

static const rx_cli_flag schedule_flags[] = {
    {"--target", NULL, "T", "the target (required): cuda, vulkan, vulkan-lavapipe, metal, ...",
     NULL},
    {0}};

static const rx_cli_flag opt_flags[] = {
    {"--passes", NULL, "P[,P...]", "the graph passes to run, in the order given (required)",
     drv_pass_names},
    {"--dispatch-min-rows", NULL, "N",
     "dispatch: matmuls of at least N rows go to cuBLASLt (as compile --dispatch cublas); "
     "default: 17",
     NULL},
    {0}};

static const rx_cli_flag codegen_flags[] = {
    {"--target", NULL, "T", "the target (required): cuda, vulkan, vulkan-lavapipe, metal, ...",
     NULL},
    {"-o", NULL, "DIR",
     "write the kernels into DIR (created with its parents if missing); default: print the "
     "sources",
     NULL},
    {0}};

/* The options of a Hugging Face model folder (compile and import take them). */
#define HF_FLAG_DTYPE                                                                              \
  {                                                                                                \
    "--dtype", NULL, "f32|f16|bf16",                                                               \
        "Hugging Face folders: the dtype weights are stored and computed in; default: f16", NULL   \
  }
#define HF_FLAG_LEN                                                                                \
  {                                                                                                \
    "--max-seq-len", NULL, "N",                                                                    \
        "Hugging Face folders: the longest sequence (prompt and generated tokens); default: the "  \
        "model's max_position_embeddings",                                                         \
        NULL                                                                                       \
  }
#define HF_FLAG_BATCH                                                                              \
  {                                                                                                \
    "--max-batch", NULL, "B",                                                                      \
        "Hugging Face folders: the most sequences one decode step takes; default: 16", NULL        \
  }
#define HF_FLAG_NO_WEIGHTS                                                                         \
  {                                                                                                \
    "--no-weights", NULL, NULL,                                                                    \
        "Hugging Face folders: from config.json alone; the weights stay parameters, passed when "  \
        "the "                                                                                     \
        "artifact runs (shape studies, compile benchmarks)",                                       \
        NULL                                                                                       \
  }
#define HF_FLAG_QUANTIZE                                                                           \
  {                                                                                                \
    "--quantize", NULL, "SCHEME",                                                                  \
        "Hugging Face folders: every layer's projections quantized at import, round to nearest: "  \
        "q4f16_g32, q4f16_g64, q4f16_g128, q4f16a_g32/64/128 (zero points), q8f16, q8f16_g64, "    \
        "q8f16_g128 (docs/ops.md, Quantized weights); default: none",                              \
        NULL                                                                                       \
  }
#define HF_FLAG_QUANTIZE_EMB                                                                       \
  {                                                                                                \
    "--quantize-embeddings", NULL, NULL,                                                           \
        "with --quantize: the embedding table (dequantized per token by quant_take) and the "      \
        "output layer in the same scheme; default: both in the compute dtype",                     \
        NULL                                                                                       \
  }
#define HF_FLAGS                                                                                   \
  HF_FLAG_DTYPE, HF_FLAG_LEN, HF_FLAG_BATCH, HF_FLAG_NO_WEIGHTS, HF_FLAG_QUANTIZE,                 \
      HF_FLAG_QUANTIZE_EMB

static const rx_cli_flag compile_flags[] = {
    {"--target", NULL, "T[,T...]",
     "the targets (required), at most one per backend: vulkan,cuda,metal", NULL},
    {"-o", NULL, "OUT.rxm", "write the artifact to OUT.rxm; default: nothing is written", NULL},
    {"--dump-after", NULL, "STEP", "print the module after STEP (or after every step: all)",
     drv_compile_step_names},
    {"--time-passes", NULL, NULL, "print a table of the time of each step on stderr", NULL},
    {"--batch", NULL, "FN[:SHARED,...][@MAX][,gather]",
     "add FN_batched, FN over a leading batch dim (at most MAX); SHARED params stay unbatched; "
     "gather: also FN_batched_gather, its index-array form (repeatable)",
     NULL},
    {"--batch-policy", NULL, "TABLE",
     "carry the batcher's learned FSM table TABLE (rx_rt_batcher_policy_save's bytes) in the "
     "artifact: a batcher under the FSM policy uses it without training",
     NULL},
    {"--no-fuse", NULL, NULL, "skip operator fusion (one kernel per operator)", NULL},
    {"--no-nvrtc", NULL, NULL,
     "do not compile CUDA kernels with NVRTC (sources only); default: "
     "NVRTC where present",
     NULL},
    {"--dispatch", NULL, "LIB",
     "send large matmuls to a library: cublas (cuBLASLt, opened at run time; a cuda target); "
     "default: none (generated kernels)",
     NULL},
    {"--dispatch-min-rows", NULL, "N",
     "with --dispatch: matmuls of at least N rows go to the library, decided at run time where "
     "the rows are symbolic; default: 17",
     NULL},
    {"--weights", NULL, "DIR", "ONNX only: write the model's weights as DIR/<parameter>.npy", NULL},
    {"--weights-file", NULL, "PATH",
     "write the weights to the side file PATH (safetensors), which the artifact names; "
     "default: inside the artifact",
     NULL},
    {"--tensor-parallel", NULL, "N",
     "compile the global view (a mesh of N devices and placements) once per rank, each with its "
     "shards of the weights, into one multi-rank artifact; a Hugging Face folder is split by the "
     "Megatron preset (heads, KV heads, intermediate and vocabulary divisible by N)",
     NULL},
    {"--pipeline-parallel", NULL, "N",
     "a Hugging Face folder cut into N pipeline stages of contiguous layers (the embedding on the "
     "first, the final norm and lm_head on the last), rank r stage r, into one multi-rank "
     "artifact; run with mpirun -n N relaxc generate",
     NULL},
    {"--jobs", "-j", "N",
     "compile kernels on N threads; default: the online CPUs (the artifact is the same for any N)",
     NULL},
    {"--cache-dir", NULL, "DIR",
     "keep compiled kernels in DIR; default: $RELAXC_CACHE_DIR, else $XDG_CACHE_HOME/relaxc, "
     "else ~/.cache/relaxc",
     NULL},
    {"--no-cache", NULL, NULL,
     "neither read nor write the kernel cache (also: RELAXC_NO_CACHE=1 without --cache-dir)", NULL},
    {"--cache-limit", NULL, "MB",
     "evict the least recently used kernels beyond MB mebibytes (0: no limit); default: 512", NULL},
    {"--quiet", "-q", NULL, "no progress line and no notes on stderr", NULL},
    HF_FLAGS,
    {0}};

static const rx_cli_flag run_flags[] = {
    {"--device", NULL, "D",
     "the device: vulkan:0, cuda:0, metal:0; default: $RX_DEVICE, else the "
     "first device of CUDA, Metal, Vulkan",
     NULL},
    {"--fn", NULL, "F", "the function to call; default: main", NULL},
    {"--input", NULL, "NAME=FILE.npy|random:[DTYPE:]SHAPE|VALUE|shape:DIMS",
     "parameter NAME from a .npy file, or random values of SHAPE (7x4096; 'random:' alone: a 0-d "
     "tensor; DTYPE defaults to the parameter's); a Prim parameter's VALUE (n=7, flag=true); a "
     "Shape parameter's dimensions (s=shape:2x3; 'shape:' alone: none); repeat for each "
     "parameter",
     NULL},
    {"--weights", NULL, "DIR",
     "parameters without an --input from DIR/<parameter>.npy (for a weight the artifact holds: "
     "where the file exists, an override); DIR must hold the file of at least one parameter",
     NULL},
    {"--output", "-o", "OUT.npy", "write the result tensors to OUT.npy, OUT.1.npy, OUT.2.npy, ...",
     NULL},
    {"--bench", NULL, "N", "then time N more calls (1..1000000) and print the mean per call", NULL},
    {"--seed", NULL, "S", "the seed of the random inputs (a non-negative integer); default: 0",
     NULL},
    {0}};

static const rx_cli_flag inspect_flags[] = {
    {"--code", NULL, NULL, "also print the host program's disassembly", NULL},
    {"--extract", NULL, "DIR",
     "write every section as a file under DIR (created if missing): the manifest, the host "
     "program and its disassembly, each target's kernels.json, sources and binaries",
     NULL},
    {0}};

static const rx_cli_flag import_flags[] = {
    {"-o", NULL, "OUT.rx", "write the module to OUT.rx; default: standard output", NULL},
    {"--weights", NULL, "DIR",
     "write the model's weights as DIR/<parameter>.npy (DIR created if "
     "missing)",
     NULL},
    {"--list-ops", NULL, NULL,
     "print the supported ONNX operators with their opsets (README's table) and exit", NULL},
    HF_FLAGS,
    {0}};

static const rx_cli_flag generate_flags[] = {
    {"--prompt", NULL, "TEXT",
     "the prompt, tokenized by the model's tokenizer (BOS added as it says)", NULL},
    {"--prompt-ids", NULL, "1,2,3", "the prompt as token ids (taken as they are)", NULL},
    {"--chat", NULL, "TEXT",
     "a user message, put in the model's chat template (or the fallback format, docs/llm.md) with "
     "the assistant's turn to come",
     NULL},
    {"--system", NULL, "TEXT", "with --chat: a system message before the user's", NULL},
    {"--max-tokens", NULL, "N", "stop after N new tokens; default: 128", NULL},
    {"--temperature", NULL, "T", "0: greedy; default: 0.7", NULL},
    {"--top-k", NULL, "K", "sample from the K most likely tokens (0: all); default: 50", NULL},
    {"--top-p", NULL, "P", "sample from the smallest set of probability P; default: 0.95", NULL},
    {"--repetition-penalty", NULL, "R", "divide the logits of tokens seen by R; default: 1", NULL},
    {"--seed", NULL, "S", "the sampler's seed; default: 0", NULL},
    {"--device", NULL, "D",
     "the device: vulkan:0, cuda:0, metal:0; default: $RX_DEVICE, else the first device of CUDA, "
     "Metal, Vulkan",
     NULL},
    {"--kv-capacity", NULL, "N",
     "the KV cache's size in tokens; default: the maximum sequence length", NULL},
    {"--max-seq-len", NULL, "N",
     "the longest sequence (prompt and new tokens), at most the artifact's; default: the "
     "artifact's",
     NULL},
    {"--print-ids", NULL, NULL, "also print the new token ids on a line, comma-separated", NULL},
    {"--stats", NULL, NULL,
     "under mpirun: each rank prints its prefill and decode forwards' time, the share of it in "
     "collectives, and each collective's calls, bytes and time",
     NULL},
    {0}};

static const rx_cli_flag serve_flags[] = {
    {"--port", NULL, "P", "the TCP port (0: any free one, printed); default: 8000", NULL},
    {"--host", NULL, "ADDR",
     "the IPv4 address to listen on; default: 127.0.0.1 (this machine only)", NULL},
    {"--max-batch", NULL, "B",
     "the most requests generating at once, at most the artifact's max_batch (more is refused); "
     "default: 8, or the artifact's max_batch if smaller",
     NULL},
    {"--max-queue", NULL, "N",
     "the most requests waiting for a batch slot; more are answered 503 with Retry-After; "
     "default: 64",
     NULL},
    {"--request-timeout", NULL, "S",
     "seconds a request may take from arrival to the answer's end, then it ends with an error "
     "(0: none); default: 600",
     NULL},
    {"--idle-timeout", NULL, "S",
     "seconds a connection may stay silent before it is closed; "
     "default: 15",
     NULL},
    {"--read-timeout", NULL, "S",
     "seconds a request's headers and body may take to arrive, from the connection's opening "
     "or its previous answer's end; default: 30",
     NULL},
    {"--api-key", NULL, "KEY",
     "every /v1 request needs the header 'Authorization: Bearer KEY' (401 otherwise; /health and "
     "/metrics stay open); default: $RELAXC_API_KEY, else none",
     NULL},
    {"--shutdown-timeout", NULL, "S",
     "on SIGINT or SIGTERM, seconds the requests in flight may take to finish before the rest "
     "are cancelled (new ones get 503); default: 30",
     NULL},
    {"--max-connections", NULL, "N", "the most connections open at once; default: 256", NULL},
    {"--max-connections-per-ip", NULL, "N",
     "the most connections open at once from one IPv4 address; default: 64", NULL},
    {"--kv-capacity", NULL, "N", "the KV cache's size in tokens, over all requests; default: 8192",
     NULL},
    {"--max-seq-len", NULL, "N",
     "the longest sequence (prompt and new tokens), at most the artifact's; default: the "
     "artifact's",
     NULL},
    {"--tensor-parallel", NULL, "N",
     "run the model on N ranks: under mpirun -n N, rank 0 serves and the others follow; "
     "otherwise starts $RX_MPIRUN (mpirun) $RX_MPIRUN_ARGS -n N of itself; default: 1",
     NULL},
    {"--prefix-cache", NULL, "on|off",
     "keep the KV pages of prompts and start a request whose prompt begins the same from them "
     "(prefilling only the rest); default: on",
     NULL},
    {"--prefill-chunk", NULL, "N",
     "prefill at most N prompt tokens per step, beside the decode of running requests, so a long "
     "prompt does not stall the streams (0: whole prompts at once); default: 512",
     NULL},
    {"--model-name", NULL, "NAME",
     "the name requests' \"model\" must match; default: the file's name without .rxm", NULL},
    {"--device", NULL, "D",
     "the device: vulkan:0, cuda:0, metal:0; default: $RX_DEVICE, else the first device", NULL},
    {0}};

const rx_cli_command cli_commands[] = {
    {"check", "FILE", "parse, normalize and verify FILE (.rx text); diagnostics on stderr", NULL,
     no_flags, cmd_check},
    {"print", "FILE", "as check, then print the normalized module on stdout (nothing on error)",
     NULL, no_flags, cmd_check},
    {"ops", "", "list the operators with a one-line description", NULL, no_flags, cmd_ops},
    {"targets", "[TARGET]",
     "describe every target relaxc compiles for (or the one named): limits, features, matrix units",
     "TARGET is a target string as --target takes it (\"cuda -arch=sm_90\", \"metal\", ...).",
     no_flags, cmd_targets},
    {"opt", "FILE --passes P[,P...]",
     "run graph passes of the compile pipeline alone, in the order given, and print the module",
     "Each pass runs as in `relaxc compile`, the module normalized and verified after it. What a\n"
     "pass needs first is yours to give (legalize before fuse_ops and fuse_tensor).\n"
     "The steps after names (plan_memory, lower_host, schedule, codegen, artifact) build more\n"
     "than a module: `relaxc compile --dump-after STEP` shows them.",
     opt_flags, cli_cmd_opt},
    {"schedule", "FILE --target T",
     "schedule every tensor program of FILE for target T and print the module", NULL,
     schedule_flags, cli_cmd_schedule},
    {"codegen", "FILE --target T",
     "emit the kernels of FILE for target T (CUDA C, GLSL+SPIR-V, MSL) and kernels.json",
     "Without -o the sources are printed; with -o DIR each kernel's source, its binaries where\n"
     "the toolchain is present (SPIR-V; PTX and cubin with NVRTC) and kernels.json are written.",
     codegen_flags, cli_cmd_codegen},
    {"compile", "FILE --target T[,T...]",
     "the whole pipeline from FILE (.rx text, an .onnx model, a .gguf model or a Hugging Face "
     "model folder) to "
     "an artifact (docs/artifact.md)",
     "The weights (an ONNX model's initializers, tensor constants) go into the artifact, or\n"
     "with --weights-file PATH into that side file, which the artifact names; --weights DIR\n"
     "also writes an ONNX model's as .npy files, with which `relaxc run --weights DIR`\n"
     "overrides them.",
     compile_flags, cli_cmd_compile},
    {"run", "MODEL.rxm --input NAME=SPEC ...",
     "call a function of an artifact; print each result's dtype, shape and checksum",
     "The checksum is the sum and the sum of absolute values of the elements (in double).\n"
     "An input is checked against the parameter's declared dtype and shape before it is made.",
     run_flags, cli_cmd_run},
    {"inspect", "MODEL.rxm|MODEL.gguf",
     "an artifact's functions, facts, planned memory, kernels (with their schedule rules) and "
     "sections; a GGUF file's metadata, tensors and bytes per weight format",
     NULL, inspect_flags, cli_cmd_inspect},
    {"import", "MODEL.onnx|DIR",
     "import an ONNX model, a GGUF model or a Hugging Face model folder and print it as .rx text "
     "(symbolic "
     "dimensions kept)",
     NULL, import_flags, cli_cmd_import},
    {"generate", "MODEL.rxm (--prompt TEXT | --prompt-ids IDS | --chat TEXT [--system TEXT])",
     "generate text with an LLM artifact (a compiled Hugging Face model folder), streamed as it "
     "comes",
     "Prefill and decode speeds (tokens per second) are printed on stderr at the end.",
     generate_flags, cli_cmd_generate},
    {"serve", "MODEL.rxm [--port P] [--host 127.0.0.1] [--max-batch B]",
     "serve an LLM artifact over HTTP: OpenAI-style /v1/completions and /v1/chat/completions",
     "Needs a relaxc built with libmicrohttpd. Requests run together (continuous batching); "
     "\"stream\": true answers with server-sent events. README \"relaxc serve\" says more.",
     serve_flags, cli_cmd_serve},
    {"help", "[COMMAND]", "the list of commands, or a command's help", NULL, no_flags, cmd_help},
    {0},
};

static const rx_cli_command *command_named(const char *name) {
  for (const rx_cli_command *c = cli_commands; c->name; c++)
    if (!strcmp(c->name, name)) return c;
  return NULL;
}

static void usage(FILE *out) {
  fputs("usage: relaxc <command> [FILE] [options]\n\ncommands:\n", out);
  for (const rx_cli_command *c = cli_commands; c->name; c++) {
    fprintf(out, "  relaxc %s%s%s\n", c->name, c->synopsis[0] ? " " : "", c->synopsis);
    fprintf(out, "      %s\n", c->summary);
  }
  fputs("\n"
        "FILE may be '-' to read standard input. 'relaxc COMMAND --help' (or 'relaxc help\n"
        "COMMAND') lists a command's options.\n"
        "\n"
        "options:\n"
        "  -h, --help     print this help and exit\n"
        "  --version      print the version and exit\n"
        "\n"
        "exit status:\n"
        "  0  success (warnings are printed on stderr)\n"
        "  1  the input has errors, or FILE cannot be read\n"
        "  2  usage error: unknown command or option, missing or extra arguments\n",
        out);
}

static void command_names(FILE *out) {
  for (const rx_cli_command *c = cli_commands; c->name; c++)
    fprintf(out, "%s%s", c == cli_commands ? "" : ", ", c->name);
}

/* check and print: parse, normalize, verify, then (print) write the module. */
static int cmd_check(const rx_cli_command *cmd, int argc, char **argv) {
  const char *path = NULL;
  rx_cli_args it = cli_begin(cmd, argc, argv);
  while (cli_next(&it)) {
    if (it.flag) return cli_unhandled(&it);
    if (path) return cli_usage_error(cmd, "'%s' takes one FILE", cmd->name);
    path = it.value;
  }
  if (it.status >= 0) return it.status;
  if (!path)
    return cli_usage_error(cmd, "'%s' needs a FILE (or '-' for standard input)", cmd->name);
  bool print = !strcmp(cmd->name, "print");
  size_t len = 0;
  const char *name = cli_input_name(path);
  char *text = cli_read_input(path, RX_FILE_TEXT_IR, &len);
  if (!text) return EXIT_ERRORS;
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  bool ok = ir_parse_module(m, name, text, len, &diag) && ops_module_normalize(m, &diag) &&
            ir_module_verify(m, &diag);
  ok = ok && diag.errors == 0;
  fputs(rx_diag_text(&diag), stderr);
  if (ok && print) {
    rx_strbuf out = {0};
    ir_module_print(&out, m);
    if (out.data) fputs(out.data, stdout);
    if (out.len && out.data[out.len - 1] != '\n') fputc('\n', stdout);
    base_strbuf_free(&out);
  }
  base_diag_free(&diag);
  rx_module_free(m);
  free(text);
  return ok ? EXIT_OK : EXIT_ERRORS;
}

static int cmd_ops(const rx_cli_command *cmd, int argc, char **argv) {
  rx_cli_args it = cli_begin(cmd, argc, argv);
  while (cli_next(&it)) {
    if (it.flag) return cli_unhandled(&it);
    return cli_usage_error(cmd, "'ops' takes no arguments, got '%s'", it.value);
  }
  if (it.status >= 0) return it.status;
  int n = 0;
  const rx_op *const *ops = ops_op_all(&n);
  int width = 0;
  for (int i = 0; i < n; i++) {
    int w = (int)strlen(ops[i]->name);
    if (w > width) width = w;
  }
  for (int i = 0; i < n; i++)
    printf("%-*s  %s\n", width, ops[i]->name, ops[i]->doc ? ops[i]->doc : "");
  return EXIT_OK;
}

static int cmd_targets(const rx_cli_command *cmd, int argc, char **argv) {
  const char *name = NULL;
  rx_cli_args it = cli_begin(cmd, argc, argv);
  while (cli_next(&it)) {
    if (it.flag) return cli_unhandled(&it);
    if (name) return cli_usage_error(cmd, "'targets' takes one TARGET, got '%s' too", it.value);
    name = it.value;
  }
  if (it.status >= 0) return it.status;
  size_t n = 1;
  const rx_target *one = NULL, *all = NULL;
  if (name) {
    rx_status st = tgt_target_parse(name, &one);
    if (st) {
      fprintf(stderr, "relaxc: %s\n", rx_status_message(st));
      rx_status_free(st);
      return EXIT_USAGE;
    }
  } else {
    all = tgt_target_list(&n);
  }
  rx_strbuf b = {0};
  for (size_t i = 0; i < n; i++) {
    if (i) base_strbuf_putc(&b, '\n');
    tgt_target_describe(&b, one ? one : &all[i]);
  }
  fputs(b.data ? b.data : "", stdout);
  base_strbuf_free(&b);
  return EXIT_OK;
}

static int cmd_help(const rx_cli_command *cmd, int argc, char **argv) {
  const char *name = NULL;
  rx_cli_args it = cli_begin(cmd, argc, argv);
  while (cli_next(&it)) {
    if (it.flag) return cli_unhandled(&it);
    if (name) return cli_usage_error(cmd, "'help' takes one COMMAND, got '%s' too", it.value);
    name = it.value;
  }
  if (it.status >= 0) return it.status;
  if (!name) {
    usage(stdout);
    return EXIT_OK;
  }
  const rx_cli_command *c = command_named(name);
  if (!c) {
    fprintf(stderr, "relaxc: unknown command '%s' (commands: ", name);
    command_names(stderr);
    fputs(")\nTry 'relaxc --help' for more information.\n", stderr);
    return EXIT_USAGE;
  }
  cli_print_help(c, true, stdout);
  return EXIT_OK;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs("relaxc: missing command\n", stderr);
    usage(stderr);
    return EXIT_USAGE;
  }
  const char *a = argv[1];
  if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
    usage(stdout);
    return EXIT_OK;
  }
  if (!strcmp(a, "--version")) {
    printf("relaxc %s\n", RELAXC_VERSION);
    return EXIT_OK;
  }
  if (a[0] == '-' && a[1]) {
    fprintf(stderr, "relaxc: unknown option '%s' (a command comes first)\n", a);
    fputs("Try 'relaxc --help' for more information.\n", stderr);
    return EXIT_USAGE;
  }
  const rx_cli_command *c = command_named(a);
  if (!c) {
    fprintf(stderr, "relaxc: unknown command '%s' (commands: ", a);
    command_names(stderr);
    fputs(")\nTry 'relaxc --help' for more information.\n", stderr);
    return EXIT_USAGE;
  }
  return c->run(c, argc - 1, argv + 1);
}
