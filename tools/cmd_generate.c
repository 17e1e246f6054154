/* relaxc generate MODEL.rxm (--prompt TEXT | --prompt-ids 1,2,3 | --chat TEXT [--system TEXT])
 *   [--max-tokens N]
 *   [--temperature T] [--top-k K] [--top-p P] [--repetition-penalty R] [--seed S] [--device D]
 *   [--kv-capacity N] [--max-seq-len N] [--print-ids] [--stats]
 * Text from an LLM artifact (relaxc compile of a Hugging Face folder), through runtime/llm's
 * generation loop (relaxc/llm.h): the prompt is tokenized (with the BOS the tokenizer adds) or
 * taken as ids, or --chat's message (after --system's) is put in the model's chat template
 * (rx_chat_prompt: the template's text carries its special tokens, so none are added), prefilled,
 * then tokens are sampled one at a time and their text streamed to
 * stdout as it completes, until an end-of-sequence token, --max-tokens or the model's maximum
 * length. At the end, prefill and decode speeds on stderr; --print-ids adds a line with the new
 * token ids, comma-separated. Exit: 0, 1 on an error (a missing file, not an LLM artifact, a
 * prompt longer than the model allows, a full KV cache, a device error), 2 usage.
 *
 * Under mpirun (`mpirun -n N relaxc generate MODEL.rxm ...`: Open MPI's OMPI_COMM_WORLD_SIZE in
 * the environment) each process is a rank of a tensor-parallel run (docs/distributed.md): the
 * model is loaded with the MPI communicator (rank R's part: its rank of a multi-rank artifact, or
 * MODEL.rankR.rxm where it exists), rank 0 tokenizes, samples, prints and drives, and the other
 * ranks follow its calls (rx_llm_model_follow) and print nothing but errors. With --stats every
 * rank prints, at its end, where its time went (print_stats): its prefill and decode forwards'
 * wall clock and the part of it in the collective builtins (the communication share of a step),
 * and per builtin its calls, bytes and time (relaxc/ccl.h's counters). */
#include "commands.h"

#include "relaxc/ccl.h"
#include "relaxc/llm.h"
#include "relaxc/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gen_cli {
  const char *model, *prompt, *ids, *device, *chat, *system;
  long long max_tokens, kv_capacity, max_seq_len;
  rx_sampler_params sp;
  bool print_ids, stats;
} gen_cli;

/* A number option's value in [lo, hi]; 2 after a usage error. */
static int number(const rx_cli_args *it, double lo, double hi, double *out) {
  char *end = NULL;
  double v = strtod(it->value, &end);
  if (!*it->value || *end || !(v >= lo && v <= hi))
    return cli_usage_error(it->cmd, "%s %s: expected a number from %g to %g", it->flag, it->value,
                           lo, hi);
  *out = v;
  return 0;
}

static int parse(const rx_cli_command *cmd, int argc, char **argv, gen_cli *g) {
  g->sp = rx_sampler_default_params();
  g->sp.temperature = 0.7f; /* the CLI's defaults: mildly creative, reproducible by --seed */
  g->sp.top_p = 0.95f;
  g->max_tokens = 128;
  rx_cli_args it = cli_begin(cmd, argc, argv);
  while (cli_next(&it)) {
    const char *f = it.flag;
    double v = 0;
    long long n = 0;
    int rc = 0;
    if (!f) {
      if (g->model)
        return cli_usage_error(cmd, "'generate' takes one MODEL.rxm, got '%s' too", it.value);
      g->model = it.value;
    } else if (!strcmp(f, "--prompt")) {
      g->prompt = it.value;
    } else if (!strcmp(f, "--prompt-ids")) {
      g->ids = it.value;
    } else if (!strcmp(f, "--chat")) {
      g->chat = it.value;
    } else if (!strcmp(f, "--system")) {
      g->system = it.value;
    } else if (!strcmp(f, "--device")) {
      g->device = it.value;
    } else if (!strcmp(f, "--print-ids")) {
      g->print_ids = true;
    } else if (!strcmp(f, "--stats")) {
      g->stats = true;
    } else if (!strcmp(f, "--max-tokens")) {
      rc = cli_int_option(&it, 1, 1 << 24, &g->max_tokens);
    } else if (!strcmp(f, "--kv-capacity")) {
      rc = cli_int_option(&it, 1, 1 << 30, &g->kv_capacity);
    } else if (!strcmp(f, "--max-seq-len")) {
      rc = cli_int_option(&it, 1, 1 << 30, &g->max_seq_len);
    } else if (!strcmp(f, "--temperature")) {
      if (!(rc = number(&it, 0, 100, &v))) g->sp.temperature = (float)v;
    } else if (!strcmp(f, "--top-k")) {
      if (!(rc = cli_int_option(&it, 0, 1 << 30, &n))) g->sp.top_k = (int32_t)n;
    } else if (!strcmp(f, "--top-p")) {
      if (!(rc = number(&it, 1e-9, 1, &v))) g->sp.top_p = (float)v;
    } else if (!strcmp(f, "--repetition-penalty")) {
      if (!(rc = number(&it, 1e-6, 1e6, &v))) g->sp.repetition_penalty = (float)v;
    } else if (!strcmp(f, "--seed")) {
      if (!(rc = cli_int_option(&it, 0, INT64_MAX, &n))) g->sp.seed = (uint64_t)n;
    } else {
      return cli_unhandled(&it);
    }
    if (rc) return rc;
  }
  if (it.status >= 0) return it.status;
  if (!g->model) return cli_usage_error(cmd, "%s", "'generate' needs a MODEL.rxm");
  if ((g->prompt != NULL) + (g->ids != NULL) + (g->chat != NULL) != 1)
    return cli_usage_error(cmd, "%s",
                           "'generate' needs one of --prompt TEXT, --prompt-ids and --chat TEXT");
  if (g->system && !g->chat) return cli_usage_error(cmd, "%s", "--system goes with --chat");
  return -1;
}

/* "1,2,3" into ids (heap); false after printing why. */
static bool parse_ids(const rx_cli_command *cmd, const char *text, int32_t **out, size_t *n) {
  size_t cap = 1;
  for (const char *p = text; *p; p++) cap += *p == ',';
  int32_t *ids = malloc(cap * sizeof *ids);
  *n = 0;
  for (const char *p = text; ids;) {
    char *end = NULL;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
      cli_usage_error(cmd, "--prompt-ids %s: expected token ids separated by commas", text);
      free(ids);
      return false;
    }
    ids[(*n)++] = (int32_t)v;
    if (!*end) break;
    p = end + 1;
  }
  *out = ids;
  return ids != NULL;
}

static bool print_token(void *user, int32_t id, const char *text, size_t len) {
  (void)user;
  (void)id;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return true;
}

static int fail(rx_status s) {
  fprintf(stderr, "relaxc: error: %s\n", rx_status_message(s));
  rx_status_free(s);
  return 1;
}

/* The prompt's ids: tokenized text (with what the tokenizer adds, e.g. BOS), or --prompt-ids. */
static int prompt_ids(const rx_cli_command *cmd, const gen_cli *g, rx_llm_model *m, int32_t **ids,
                      size_t *n) {
  if (g->ids) return parse_ids(cmd, g->ids, ids, n) ? 0 : 2;
  const rx_tokenizer *tok = rx_llm_model_tokenizer(m);
  if (!tok) {
    fprintf(stderr,
            "relaxc: error: %s has no tokenizer (its model folder had no tokenizer.json): give "
            "the prompt as --prompt-ids\n",
            g->model);
    return 1;
  }
  rx_status s = NULL;
  if (g->chat) { /* the messages as JSON, then the template (or the fallback) over them */
    rx_strbuf j = {0};
    base_strbuf_append(&j, "[");
    if (g->system) {
      base_strbuf_append(&j, "{\"role\": \"system\", \"content\": ");
      base_strbuf_json_string(&j, g->system);
      base_strbuf_append(&j, "}, ");
    }
    base_strbuf_append(&j, "{\"role\": \"user\", \"content\": ");
    base_strbuf_json_string(&j, g->chat);
    base_strbuf_append(&j, "}]");
    const rx_chat_template *t = rx_llm_model_chat_template(m);
    char *text = NULL;
    size_t len = 0;
    s = rx_chat_prompt(t, j.data, j.len, NULL, 0, &text, &len);
    base_strbuf_free(&j);
    if (!s) s = rx_tokenizer_encode(tok, text, len, t ? 0 : RX_TOKENIZER_ADD_SPECIAL, ids, n);
    rx_llm_free(text);
  } else {
    s = rx_tokenizer_encode(tok, g->prompt, strlen(g->prompt), RX_TOKENIZER_ADD_SPECIAL, ids, n);
  }
  if (s) return fail(s);
  if (*n) return 0;
  fprintf(stderr, "relaxc: error: the prompt has no tokens\n");
  return 1;
}

/* --stats: this rank's forwards (rx_llm_model_step_stats) and collectives since the warm-up. */
static void print_stats(const rx_llm_model *m, const rx_rt_comm *comm) {
  int rank = rx_rt_comm_rank(comm);
  rx_llm_step_stats st = rx_llm_model_step_stats(m);
  const char *name[2] = {"prefill", "decode"};
  const uint64_t n[2] = {st.prefills, st.decodes};
  const double sec[2] = {st.prefill_seconds, st.decode_seconds},
               comm_sec[2] = {st.prefill_comm_seconds, st.decode_comm_seconds};
  for (int k = 0; k < 2; k++)
    fprintf(stderr,
            "stats: rank %d: %s: %llu forwards in %.1f ms (%.2f ms each), %.1f ms of it in "
            "collectives (%.1f%%)\n",
            rank, name[k], (unsigned long long)n[k], sec[k] * 1e3,
            n[k] ? sec[k] * 1e3 / (double)n[k] : 0.0, comm_sec[k] * 1e3,
            100.0 * comm_sec[k] / (sec[k] + 1e-12));
  for (int k = 0; k < RX_CCL_KIND_COUNT; k++) {
    rx_rt_comm_counter c = rx_rt_comm_counter_of(comm, (rx_ccl_kind)k);
    if (c.calls)
      fprintf(stderr, "stats: rank %d: %s: %llu calls, %llu bytes, %.1f ms (%.1f us each)\n", rank,
              rx_ccl_kind_name((rx_ccl_kind)k), (unsigned long long)c.calls,
              (unsigned long long)c.bytes, c.seconds * 1e3, c.seconds * 1e6 / (double)c.calls);
  }
}

/* A rank other than 0: loads its part, follows rank 0, and ends when rank 0 does. */
static int follow(const char *model, const rx_llm_model_options *mo, bool stats) {
  rx_llm_model *m = NULL;
  rx_status s = rx_llm_model_load(model, mo, &m);
  if (!s) { /* the warm-up's forwards not counted, as on rank 0 */
    rx_rt_comm_stats_reset(mo->comm);
    rx_llm_model_step_stats_reset(m);
  }
  if (!s) s = rx_llm_model_follow(m);
  if (!s && stats) print_stats(m, mo->comm);
  if (!s) /* what this rank's KV cache holds of generate's sequence: rank 0's prompt and tokens */
    fprintf(stderr, "relaxc: rank %d: followed rank 0: sequence 0 holds %lld tokens\n",
            rx_rt_comm_rank(mo->comm), (long long)rx_llm_model_seq_len(m, 0));
  rx_llm_model_free(m);
  if (s) {
    fprintf(stderr, "relaxc: rank %d: ", rx_rt_comm_rank(mo->comm));
    return fail(s);
  }
  return 0;
}

int cli_cmd_generate(const rx_cli_command *cmd, int argc, char **argv) {
  gen_cli g = {0};
  int rc = parse(cmd, argc, argv, &g);
  if (rc >= 0) return rc;
  rx_llm_model_options mo = {
      .device = g.device, .capacity = g.kv_capacity, .max_seq_len = g.max_seq_len};
  rx_status s = NULL;
  const char *world = getenv("OMPI_COMM_WORLD_SIZE");
  if (world && atoi(world) > 1) { /* under mpirun: a rank of a tensor-parallel run */
    if ((s = rx_rt_comm_create_mpi(&mo.comm))) return fail(s);
    if (rx_rt_comm_rank(mo.comm) != 0) {
      rc = follow(g.model, &mo, g.stats);
      rx_rt_comm_release(mo.comm);
      return rc;
    }
  }
  rx_llm_model *m = NULL;
  s = rx_llm_model_load(g.model, &mo, &m);
  if (s) {
    rx_rt_comm_release(mo.comm); /* NULL is fine */
    return fail(s);
  }
  if (mo.comm) { /* the warm-up's collectives not counted */
    rx_rt_comm_stats_reset(mo.comm);
    rx_llm_model_step_stats_reset(m);
  }
  int32_t *ids = NULL, *out = NULL;
  size_t n = 0;
  rc = prompt_ids(cmd, &g, m, &ids, &n);
  if (!rc && !(out = calloc((size_t)g.max_tokens, sizeof *out))) rc = 1;
  rx_llm_generate_stats st = {0};
  if (!rc) {
    rx_llm_generate_params p = {.sampling = g.sp,
                                .max_tokens = g.max_tokens,
                                .on_token =
                                    g.print_ids && !rx_llm_model_tokenizer(m) ? NULL : print_token};
    s = rx_llm_generate(m, 0, ids, n, &p, out, &st);
    if (rx_llm_model_tokenizer(m)) fputc('\n', stdout);
    if (s) rc = fail(s);
  }
  if (!rc && g.print_ids) {
    for (size_t i = 0; i < st.new_tokens; i++) printf("%s%d", i ? "," : "", (int)out[i]);
    printf("\n");
  }
  const char *last = NULL; /* under the validation layer (RX_VULKAN_VALIDATION=1), as run */
  size_t nv = rx_rt_device_validation_messages(rx_llm_model_device(m), &last);
  if (!rc && nv) {
    fprintf(stderr, "relaxc: error: %zu Vulkan validation messages, the last: %s\n", nv, last);
    rc = 1;
  }
  if (!rc) {
    fprintf(stderr,
            "prefill: %zu tokens in %.1f ms (%.1f tok/s); decode: %zu tokens in %.1f ms (%.1f "
            "tok/s)%s; %s\n",
            st.prompt_tokens, st.prefill_ms, st.prompt_tokens * 1e3 / (st.prefill_ms + 1e-9),
            st.new_tokens, st.decode_ms,
            st.new_tokens > 1 ? (st.new_tokens - 1) * 1e3 / (st.decode_ms + 1e-9) : 0.0,
            st.stopped_by_eos ? ", stopped at end of sequence" : "", rx_llm_model_device_name(m));
  }
  if (!rc && mo.comm) { /* rank 0's time in the collective builtins: the communication share */
    double sec = 0;
    uint64_t calls = 0;
    rx_rt_comm_stats(mo.comm, &sec, &calls);
    fprintf(stderr,
            "%d ranks: %llu collectives on rank 0 in %.1f ms (%.1f%% of prefill and decode)\n",
            rx_rt_comm_size(mo.comm), (unsigned long long)calls, sec * 1e3,
            100.0 * sec * 1e3 / (st.prefill_ms + st.decode_ms + 1e-9));
  }
  if (!rc && mo.comm && g.stats) print_stats(m, mo.comm);
  rx_llm_free(ids);
  free(out);
  rx_llm_model_free(m); /* ends the other ranks' rx_llm_model_follow */
  rx_rt_comm_release(mo.comm);
  return rc;
}
