/* relaxc compile FILE --target T[,T...] [-o OUT.rxm] [--dump-after=STEP] [--time-passes]
 *                [--no-fuse] [--no-nvrtc] [--dispatch cublas [--dispatch-min-rows N]]
 *                [--weights DIR] [--weights-file PATH] [-j N]
 *                [--cache-dir DIR | --no-cache] [--cache-limit MB] [--quiet]
 *                [--batch FN:SHARED[@MAX][,gather]] [--batch-policy TABLE]
 * Runs the whole pipeline (driver/driver.h) and writes the artifact (docs/artifact.md).
 * FILE is .rx text, an ONNX model (a name ending in .onnx, or content starting with a binary
 * byte: see cli_is_onnx) or a Hugging Face model folder (a directory with config.json:
 * frontends/hf, with --dtype, --max-seq-len, --max-batch, --no-weights), imported as by `relaxc
 * import` (external data read relative to its directory). The module's weights (an ONNX model's
 * initializers, bound to the parameters of `main` after its inputs; tensor constants) are
 * streamed into the artifact, or with --weights-file PATH into that side file, which the
 * artifact names relative to itself (docs/artifact.md, "Weights"); --weights DIR also writes an
 * ONNX model's as DIR/<parameter name>.npy (`relaxc run --weights DIR` overrides with them).
 * Dumps go to stdout, the timing table and diagnostics to stderr, then a one-line summary on
 * stdout. Kernels compile on -j N threads (default: the online CPUs) through the kernel cache
 * (driver/kcache.c; --cache-dir, else $RELAXC_CACHE_DIR, else $XDG_CACHE_HOME/relaxc, else
 * ~/.cache/relaxc; --no-cache or RELAXC_NO_CACHE=1 without --cache-dir: none); a cache that
 * cannot be opened is a warning, never an error. On a terminal, a compile longer than a second
 * shows one updating progress line on stderr (not with --quiet).
 * --tensor-parallel N (issue 35): FILE's global view (distributed struct info on a one-axis mesh
 * of N devices: docs/text-format.md, "Distributed tensors") compiled once per rank, each with its
 * shards of the weights (passes/shard.c) and its own memory plan, into ONE multi-rank artifact
 * (docs/artifact.md, "Multi-rank artifacts"). A Hugging Face model folder is split by the
 * Megatron preset instead (frontends/hf/tp.c: each rank's local program imported directly).
 * --batch-policy TABLE (issue 36): the batcher's learned FSM table (rx_rt_batcher_policy_save's
 * bytes, or bench/autobatch_bench --save-policy) carried in the artifact, checked against the
 * module (rx_module_set_batch_policy).
 * --pipeline-parallel N: a Hugging Face model folder cut into N stages of contiguous layers, rank
 * r stage r (frontends/hf/pp.c, docs/distributed.md "Pipeline parallelism"), into the same kind
 * of multi-rank artifact. Without -o nothing is written. Exit: 0 success, 1 errors (unreadable
 * file, unknown target, compile errors, unwritable output), 2 usage errors. */
#include "commands.h"

#include "driver/driver.h"
#include "frontends/hf/hf.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "relaxc/compiler.h" /* rx_batch_function (not only through onnx_import.h) */
#include "targets/target.h"

#ifdef RX_HAVE_ONNX
#include "frontends/onnx/onnx_import.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The toolchain options of the command line: threads, cache, progress. */
typedef struct tc_flags {
  int jobs; /* 0: the online CPUs */
  const char *cache_dir;
  bool no_cache, quiet;
  uint64_t cache_limit;
} tc_flags;

/* --jobs (-j), --cache-dir, --no-cache, --cache-limit, --quiet: 0 when taken, 2 on a bad value, -1
 * when the flag is another's. */
static int tc_flag(const rx_cli_args *it, tc_flags *c) {
  const char *f = it->flag, *v = it->value;
  if (!strcmp(f, "--cache-dir")) {
    c->cache_dir = v;
  } else if (!strcmp(f, "--no-cache")) {
    c->no_cache = true;
  } else if (!strcmp(f, "--quiet")) {
    c->quiet = true;
  } else if (!strcmp(f, "--jobs") || !strcmp(f, "--cache-limit")) {
    bool j = !strcmp(f, "--jobs");
    long long n = 0;
    int rc = cli_int_option(it, j ? 1 : 0, j ? 1024 : (1ll << 40), &n);
    if (rc) return rc;
    if (j)
      c->jobs = (int)n;
    else
      c->cache_limit = (uint64_t)n << 20;
  } else {
    return -1;
  }
  return 0;
}

/* The cache the flags ask for into o->cache (NULL: none); a cache that cannot be opened is a
 * warning, and the compile goes on without it. */
static void open_cache(const tc_flags *c, rx_compile_options *o) {
  o->cache = NULL;
  const char *off = getenv("RELAXC_NO_CACHE");
  if (c->no_cache || (!c->cache_dir && off && *off && strcmp(off, "0"))) return;
  char *dir = c->cache_dir ? base_strdup(c->cache_dir) : drv_kcache_default_dir();
  if (!dir) {
    fprintf(stderr, "relaxc: warning: no kernel cache (neither $XDG_CACHE_HOME nor $HOME is "
                    "set; --cache-dir DIR names one)\n");
    return;
  }
  rx_status st = drv_kcache_open(dir, c->cache_limit, &o->cache);
  if (st) {
    fprintf(stderr, "relaxc: warning: no kernel cache: %s\n", rx_status_message(st));
    rx_status_free(st);
  }
  free(dir);
}

/* The one-line summary on stdout: functions, programs, kernels per target, planned memory and
 * what was written where. */
static void summary(const char *file, const rx_compile_result *r, const char *outpath,
                    const char *wdir, const char *wfile) {
  int64_t peak = 0;
  for (int i = 0; i < r->plan.nfns; i++)
    if (r->plan.fns[i].peak_bytes > peak) peak = r->plan.fns[i].peak_bytes;
  printf("relaxc: %s: %d function%s, %d program%s; kernels:", file, r->nfunctions,
         r->nfunctions == 1 ? "" : "s", r->nprograms, r->nprograms == 1 ? "" : "s");
  for (int t = 0; t < r->ntargets; t++)
    printf("%s %s %d", t ? "," : "", tgt_target_kind_name(r->targets[t].target->kind),
           r->targets[t].nkernels);
  printf("; planned peak %lld bytes", (long long)peak);
  if (outpath)
    printf(" -> %s (%zu bytes)", outpath, r->artifact_size);
  else
    printf(" (no -o: nothing written)");
  if (wdir) printf("; weights -> %s/", wdir);
  if (r->weights_ref)
    printf("; %zu weights -> %s (%llu bytes)", r->weights.count, wfile,
           (unsigned long long)r->weights.size);
  printf("\n");
}

/* FILE into m: kind 'h' a Hugging Face folder, 'o' an ONNX model (its weights bound), 't' text.
 * *out_reported: the error is printed already (else it is in diag). */
static bool load(rx_module *m, const char *file, const char *text, size_t len, char kind,
                 const rx_hf_options *hfo, rx_diag *diag, bool *out_reported) {
  if (kind == 'h') {
    *out_reported = !cli_import_hf(m, file, hfo);
    return !*out_reported;
  }
  if (kind == 't')
    return ir_parse_module(m, cli_input_name(file), text, len, diag) && diag->errors == 0;
#ifdef RX_HAVE_ONNX
  char *base = cli_dir_of(file);
  rx_status st = onnx_import(m, text, len, cli_input_name(file), base, diag);
  if (!st) st = onnx_add_weights(m, text, len, cli_input_name(file), base); /* bound */
  free(base);
  if (st) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(st));
    rx_status_free(st);
  }
  *out_reported = st != NULL;
  return !st && diag->errors == 0;
#else
  return false; /* cli_cmd_compile refused it before */
#endif
}

/* true for OK; an error printed (and *reported set) otherwise. */
static bool reported_ok(rx_status st, bool *reported) {
  if (!st) return true;
  fprintf(stderr, "relaxc: error: %s\n", rx_status_message(st));
  rx_status_free(st);
  *reported = true;
  return false;
}

/* --tensor-parallel N: rank r's artifact compiled from a fresh import with rank r's weights,
 * written next to outpath, then all put into outpath (each part removed). A Hugging Face model
 * is imported as rank r's local program by the Megatron preset (frontends/hf, tp_world); text
 * and ONNX give the global view, lowered per rank by the shard pass. With stages
 * (--pipeline-parallel N, a Hugging Face model only) rank r is pipeline stage r (pp_world). */
static bool compile_ranks(int world, bool stages, const char *file, const char *text, size_t len,
                          char kind, const rx_hf_options *hfo, rx_compile_options *o,
                          const char *outpath, rx_diag *diag, bool *reported) {
  char **parts = calloc((size_t)world, sizeof *parts);
  bool ok = true;
  for (int r = 0; ok && r < world; r++) {
    rx_module *m = rx_module_new();
    rx_hf_options h = *hfo;
    if (stages) { /* --pipeline-parallel: rank r is stage r (frontends/hf, pp_world) */
      h.pp_world = world;
      h.pp_rank = r;
    } else {
      h.tp_world = world;
      h.tp_rank = r;
    }
    ok = load(m, file, text, len, kind, &h, diag, reported);
    const rx_mesh *me = ok && m->meshes.len ? &m->meshes.data[0] : NULL;
    if (ok && kind != 'h' && (!me || me->ndim != 1 || me->shape[0] != world)) {
      fprintf(stderr,
              "relaxc: error: --tensor-parallel %d: %s declares %s; expected one mesh of "
              "%d devices (mesh m = [%d])\n",
              world, cli_input_name(file), me ? "another mesh" : "no mesh", world, world);
      *reported = true;
      ok = false;
    }
    ok = ok && (kind == 'h' || pass_shard_weights(m, world, r, diag));
    rx_compile_result res;
    memset(&res, 0, sizeof res);
    if (outpath) {
      size_t n = strlen(outpath) + 32;
      parts[r] = malloc(n);
      snprintf(parts[r], n, "%s.rank%d.tmp", outpath, r);
      o->artifact_path = parts[r];
    }
    ok = ok && drv_compile(m, o, diag, &res);
    if (ok && outpath) ok = reported_ok(drv_artifact_write(parts[r], NULL, m, &res), reported);
    drv_compile_result_free(&res);
    rx_module_free(m);
  }
  if (ok && outpath)
    ok =
        reported_ok(drv_artifact_ranks_write(outpath, (const char *const *)parts, world), reported);
  for (int r = 0; r < world; r++) {
    if (parts[r]) remove(parts[r]);
    free(parts[r]);
  }
  free(parts);
  o->artifact_path = outpath;
  if (ok)
    printf("%s: %d ranks%s%s%s\n", cli_input_name(file), world, stages ? " (pipeline stages)" : "",
           outpath ? " -> " : "", outpath ? outpath : "");
  return ok;
}

/* Whether a flag of a Hugging Face model folder was given. */
static bool hf_flags_given(const rx_hf_options *h) {
  return h->dtype || h->max_seq_len || h->max_batch || h->no_weights || h->quantize ||
         h->quantize_embeddings;
}

/* --tensor-parallel N: N in 1..4096, else 0. */
static long tp_flag(const char *v) {
  char *end;
  long n = strtol(v, &end, 10);
  return *end || n < 1 || n > 4096 ? 0 : n;
}

/* --pipeline-parallel P beside --tensor-parallel T, or for a file that the Hugging Face importer
 * does not read: a usage error naming why. */
static int pipeline_usage(const rx_cli_command *cmd, long pp, long tp, const char *file) {
  if (tp > 1)
    return cli_usage_error(cmd,
                           "--pipeline-parallel %ld with --tensor-parallel %ld: stages of "
                           "tensor-parallel groups (a 2-D mesh of ranks) are not built yet; give "
                           "one of the two",
                           pp, tp);
  return cli_usage_error(cmd,
                         "--pipeline-parallel is for a Hugging Face model folder or a GGUF file "
                         "(the importer cuts its layers into stages); '%s' is neither",
                         cli_input_name(file));
}

/* compile_ranks with its diagnostics printed and the kernel cache closed. */
static bool run_ranks(int world, bool stages, const char *file, char *text, size_t len, char kind,
                      const rx_hf_options *hfo, rx_compile_options *o, const char *outpath,
                      bool ignored) {
  if (ignored)
    fprintf(stderr,
            "relaxc: warning: %s ignores --weights-file, --weights, --batch and --batch-policy\n",
            stages ? "--pipeline-parallel" : "--tensor-parallel");
  rx_diag diag;
  base_diag_init(&diag);
  bool reported = false;
  bool ok = compile_ranks(world, stages, file, text, len, kind, hfo, o, outpath, &diag, &reported);
  fputs(rx_diag_text(&diag), stderr);
  if (!ok && diag.errors == 0 && !reported) fputs("relaxc: error: compilation failed\n", stderr);
  drv_kcache_close(o->cache);
  base_diag_free(&diag);
  free(text);
  return ok;
}

/* Whether --dump-after names a step; prints the known ones when not. */
static bool dump_step_known(const char *step) {
  if (drv_compile_step_known(step)) return true;
  rx_strbuf b = {0};
  for (int i = 0; drv_compile_step_names[i]; i++)
    base_strbuf_printf(&b, "%s%s", i ? ", " : "", drv_compile_step_names[i]);
  fprintf(stderr, "relaxc: unknown step '%s' for --dump-after (known: %s, all)\n", step, b.data);
  base_strbuf_free(&b);
  return false;
}

/* --batch FN[:SHARED,...][@MAX][,gather] (or @gather): adds FN_batched (passes/batch_fn.c),
 * with the fact batch <= MAX when given, and with gather also FN_batched_gather, its index-array
 * form; false after printing why not */
static bool batch_flag(rx_module *m, const char *spec, bool *out_reported) {
  char *copy = base_strdup(spec), *at = strchr(copy, '@'), *colon = strchr(copy, ':');
  const char *shared[64];
  size_t n = 0;
  long long max = 0;
  bool gather = false;
  if (at) {
    char *g = !strcmp(at + 1, "gather") ? at + 1 : strstr(at + 1, ",gather");
    if (g && !strcmp(g + (*g == ','), "gather")) {
      gather = true;
      *g = '\0';
    }
  }
  bool max_ok = !at || (gather && !at[1]) || cli_parse_int(at + 1, 1, INT64_MAX, &max);
  if (at) *at = '\0';
  if (colon) {
    *colon = '\0';
    for (char *p = strtok(colon + 1, ","); p && n < RX_ARRAY_LEN(shared); p = strtok(NULL, ","))
      shared[n++] = p;
  }
  char name[256];
  snprintf(name, sizeof name, "%s_batched", copy);
  rx_status st =
      !max_ok ? base_status_make(RX_ERR_INVALID,
                                 "--batch %s: expected @MAX, an integer >= 1, and/or gather", spec)
              : rx_batch_function(m, copy, shared, n, max, name);
  if (!st && gather) {
    char gname[300];
    snprintf(gname, sizeof gname, "%s_gather", name);
    st = rx_batch_function_gather(m, copy, shared, n, max, gname);
  }
  free(copy);
  if (!st) return true;
  fprintf(stderr, "relaxc: error: %s\n", rx_status_message(st));
  rx_status_free(st);
  *out_reported = true;
  return false;
}

/* --batch-policy TABLE: the table's bytes checked and put in m; false after printing why not */
static bool batch_policy_flag(rx_module *m, const char *path, bool *out_reported) {
  char *bytes = NULL;
  size_t len = 0;
  rx_status st = base_read_file(path, &bytes, &len);
  if (!st) st = rx_module_set_batch_policy(m, bytes, len, path);
  free(bytes);
  if (!st) return true;
  fprintf(stderr, "relaxc: error: --batch-policy: %s\n", rx_status_message(st));
  rx_status_free(st);
  *out_reported = true;
  return false;
}

/* The --batch flags, then --batch-policy (whose table may name a batched form) */
static bool batch_flags(rx_module *m, const char *const *batches, size_t n, const char *policy,
                        bool *out_reported) {
  bool ok = true;
  for (size_t i = 0; ok && i < n; i++) ok = batch_flag(m, batches[i], out_reported);
  return ok && (!policy || batch_policy_flag(m, policy, out_reported));
}

/* --dispatch LIB, --dispatch-min-rows N: 0 when taken, 2 after a usage error */
static int dispatch_flag(const rx_cli_args *it, const char **library, long long *min_rows) {
  if (it->flag[10] == '\0') { /* --dispatch */
    *library = it->value;
    return 0;
  }
  return cli_int_option(it, 1, INT32_MAX, min_rows);
}

/* A folder without config.json: false after saying so and what a model folder holds (not "is a
 * directory" alone). */
static bool not_bare_dir(const char *path) {
  rx_status s = hf_check_not_bare_dir(path);
  bool ok = !s;
  if (s) fprintf(stderr, "relaxc: error: %s\n", rx_status_message(s));
  rx_status_free(s);
  return ok;
}

/* false, with the error printed, where this relaxc was built without the ONNX importer */
static bool onnx_built(const char *file) {
#ifdef RX_HAVE_ONNX
  (void)file;
  return true;
#else
  fprintf(stderr,
          "relaxc: error: %s is an ONNX model, and ONNX support was not built: install "
          "protobuf-c-compiler libprotobuf-c-dev libonnx-dev and rebuild\n",
          cli_input_name(file));
  return false;
#endif
}

int cli_cmd_compile(const rx_cli_command *cmd, int argc, char **argv) {
  const char *file = NULL, *target = NULL, *outpath = NULL, *wdir = NULL, *wfile = NULL;
  const char *dispatch = NULL, *policy = NULL;     /* --dispatch, --batch-policy TABLE */
  long long min_rows = 0;                          /* --dispatch-min-rows; 0: the default */
  rx_compile_options o = {.stream_weights = true}; /* weights streamed, never held whole */
  rx_hf_options hfo = {0};
  tc_flags tc = {.cache_limit = RX_KCACHE_DEFAULT_LIMIT};
  const char *batches[8]; /* --batch FN[:SHARED,...] */
  size_t nbatch = 0;
  long tp = 0, pp = 0; /* --tensor-parallel N, --pipeline-parallel N */
  rx_cli_args it = cli_begin(cmd, argc, argv);
  while (cli_next(&it)) {
    const char *f = it.flag;
    int tc_rc = f ? tc_flag(&it, &tc) : -1;
    if (tc_rc >= 0) {
      if (tc_rc) return tc_rc;
    } else if (!f) {
      if (file) return cli_usage_error(cmd, "'compile' takes one FILE, got '%s' too", it.value);
      file = it.value;
    } else if (!strcmp(f, "-o")) {
      outpath = o.artifact_path = it.value;
    } else if (!strcmp(f, "--weights")) {
      wdir = it.value;
    } else if (!strcmp(f, "--weights-file")) {
      wfile = o.weights_file = it.value; /* the weights in this side file */
    } else if (!strcmp(f, "--target")) {
      target = it.value;
    } else if (!strcmp(f, "--dump-after")) {
      o.dump_after = it.value;
    } else if (!strcmp(f, "--batch")) {
      if (nbatch == RX_ARRAY_LEN(batches))
        return cli_usage_error(cmd, "%s", "--batch given more than 8 times");
      batches[nbatch++] = it.value;
    } else if (!strcmp(f, "--batch-policy")) {
      policy = it.value;
    } else if (!strcmp(f, "--tensor-parallel")) {
      if (!(tp = tp_flag(it.value))) return cli_usage_error(cmd, "--tensor-parallel: 1..4096");
    } else if (!strcmp(f, "--pipeline-parallel")) {
      if (!(pp = tp_flag(it.value))) return cli_usage_error(cmd, "--pipeline-parallel: 1..4096");
    } else if (!strcmp(f, "--time-passes")) {
      o.time_passes = true;
    } else if (!strcmp(f, "--no-fuse")) {
      o.no_fuse = true;
    } else if (!strcmp(f, "--no-nvrtc")) {
      o.no_nvrtc = true;
    } else if (!strcmp(f, "--dispatch") || !strcmp(f, "--dispatch-min-rows")) {
      if (dispatch_flag(&it, &dispatch, &min_rows)) return 2;
    } else if (!strcmp(f, "--dtype") || !strcmp(f, "--max-seq-len") || !strcmp(f, "--max-batch") ||
               !strcmp(f, "--no-weights") || !strcmp(f, "--quantize") ||
               !strcmp(f, "--quantize-embeddings")) {
      int rc = cli_hf_flag(&it, &hfo);
      if (rc) return rc;
    } else {
      return cli_unhandled(&it);
    }
  }
  if (it.status >= 0) return it.status;
  if (!file)
    return cli_usage_error(cmd, "%s", "'compile' needs a FILE (or '-' for standard input)");
  if (!target)
    return cli_usage_error(cmd, "%s", "'compile' needs --target (e.g. vulkan,cuda,metal)");
  if (o.dump_after && !dump_step_known(o.dump_after)) return 2;
  if (min_rows && !dispatch)
    return cli_usage_error(cmd, "%s", "--dispatch-min-rows needs --dispatch cublas");
  rx_status tst = drv_compile_options_set_targets(&o, target);
  if (!tst) tst = drv_compile_options_set_dispatch(&o, dispatch, min_rows);
  if (tst) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(tst));
    rx_status_free(tst);
    return 1;
  }
  if (outpath && !cli_can_write(outpath)) return 1; /* before any work */
  if (wfile && !outpath) return cli_usage_error(cmd, "%s", "--weights-file needs -o OUT.rxm");
  if (wfile && !cli_can_write(wfile)) return 1;
  if (!not_bare_dir(file)) return 1;
  bool hf = hf_is_model_dir(file) || gguf_hf_is_gguf(file);
  if (pp > 1 && (tp > 1 || !hf)) return pipeline_usage(cmd, pp, tp, file);
  size_t len = 0;
  char *text = hf ? base_strdup("") : cli_read_input(file, RX_FILE_MODEL, &len);
  if (!text) return 1;
  bool onnx = !hf && cli_is_onnx(file, text, len);
  if (!hf && hf_flags_given(&hfo)) {
    free(text);
    return cli_usage_error(cmd,
                           "--dtype, --max-seq-len, --max-batch, --no-weights and --quantize "
                           "are for a Hugging Face model folder; '%s' is not one (no config.json)",
                           cli_input_name(file));
  }
  if (wdir && !onnx) {
    free(text);
    return cli_usage_error(cmd, "--weights is for an ONNX model; '%s' is .rx text",
                           cli_input_name(file));
  }
  if (onnx && !onnx_built(file)) {
    free(text);
    return 1;
  }

  o.jobs = tc.jobs;
  o.progress = !tc.quiet && isatty(2);
  open_cache(&tc, &o);
  char kind = hf ? 'h' : onnx ? 'o' : 't';
  if (pp > 1 || tp) /* takes text */
    return run_ranks(pp > 1 ? (int)pp : (int)tp, pp > 1, file, text, len, kind, &hfo, &o, outpath,
                     wfile || wdir || nbatch || policy)
               ? 0
               : 1;
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  rx_strbuf dumps = {0};
  o.dump_out = &dumps;
  rx_compile_result r;
  memset(&r, 0, sizeof r);
  bool reported = false; /* an error is printed already */
  bool ok = load(m, file, text, len, kind, &hfo, &diag, &reported);
  ok = ok && batch_flags(m, batches, nbatch, policy, &reported);
  ok = ok && drv_compile(m, &o, &diag, &r);
  if (dumps.data) fputs(dumps.data, stdout);
  fflush(stdout);
  fputs(rx_diag_text(&diag), stderr);
  if (ok && !tc.quiet)
    for (int t = 0; t < r.ntargets; t++)
      if (r.targets[t].note)
        fprintf(stderr, "relaxc: note: %s: %s\n", r.targets[t].target->name, r.targets[t].note);
#ifdef RX_HAVE_ONNX
  if (ok && wdir && cli_write_onnx_weights(file, text, len, wdir) != 0) {
    ok = false;
    reported = true;
  }
#endif
  if (ok && outpath) ok = reported_ok(drv_artifact_write(outpath, wfile, m, &r), &reported);
  if (ok) {
    summary(file, &r, outpath, wdir, wfile);
  } else if (diag.errors == 0 && !reported) {
    fputs("relaxc: error: compilation failed\n", stderr);
  }
  drv_compile_result_free(&r);
  drv_kcache_close(o.cache);
  base_strbuf_free(&dumps);
  base_diag_free(&diag);
  rx_module_free(m);
  free(text);
  return ok ? 0 : 1;
}
