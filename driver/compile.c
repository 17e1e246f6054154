/* driver/compile.c: the whole pipeline as one readable list (drv_compile, at the bottom).
 * Each step is a function of the module; after each, the verifier runs (a step that breaks
 * the module is a bug and stops the pipeline with the verifier's report), the module may be
 * printed (--dump-after) and the step is timed (--time-passes). */
#include "driver.h"

#include "../passes/passes.h"
#include "../passes/schedule.h"
#include "../targets/toolchain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The pipeline's steps in their order: the one list of their names (--dump-after, relaxc opt).
 *   G(name, fn): a graph pass, a function of the module alone: bool fn(rx_module *, rx_diag *);
 *   O(name, fn): a graph pass with options: bool fn(rx_module *, const rx_compile_options *,
 *                rx_diag *);
 *   S(name):     a step that builds what follows the module (the memory plan, the host program,
 *                kernels, the artifact), run by its own function below.
 * Graph passes run through step() (verified, dumped and timed after) and can run alone
 * (drv_pass_run, `relaxc opt --passes`). */
#define RX_COMPILE_STEPS(G, O, S)                                                                  \
  G(verify, input)                                                                                 \
  G(inline, pass_inline) /* not run by drv_compile: relaxc opt, batch_fn */                        \
  G(shard, pass_shard_module)                                                                      \
  G(fold, pass_fold)                                                                               \
  G(cse, pass_cse)                                                                                 \
  G(dce, pass_dce)                                                                                 \
  O(dispatch, dispatch_pass)                                                                       \
  G(legalize, pass_legalize)                                                                       \
  G(annotate, pass_annotate)                                                                       \
  G(fuse_ops, pass_fuse_ops)                                                                       \
  G(fuse_tensor, pass_fuse_tensor)                                                                 \
  G(dedup, pass_dedup)                                                                             \
  G(names, pass_short_names)                                                                       \
  S(plan_memory)                                                                                   \
  S(lower_host)                                                                                    \
  S(schedule)                                                                                      \
  S(codegen)                                                                                       \
  S(artifact)

#define STEP_NAME(name, ...) #name,
const char *const drv_compile_step_names[] = {RX_COMPILE_STEPS(STEP_NAME, STEP_NAME, STEP_NAME)
                                                  NULL};
#define NO_STEP(...)
const char *const drv_pass_names[] = {RX_COMPILE_STEPS(STEP_NAME, STEP_NAME, NO_STEP) NULL};

bool drv_compile_step_known(const char *name) {
  if (!strcmp(name, "all")) return true;
  for (int i = 0; drv_compile_step_names[i]; i++)
    if (!strcmp(name, drv_compile_step_names[i])) return true;
  return false;
}

typedef struct pipe {
  rx_module *m;
  const rx_compile_options *o;
  rx_diag *diag;
  rx_compile_result *r;
  rx_strbuf times; /* the rows of the timing table */
  double total_ms;
  int cur;         /* the target being compiled (dumps) */
  double start_ms; /* when the compile began (the progress line) */
} pipe;

static double now_ms(void) { return drv_compile_now_ms(); }

static void out_text(rx_strbuf *to, const char *s) {
  if (to)
    base_strbuf_append(to, s);
  else
    fputs(s, stderr);
}

static bool wants_dump(pipe *p, const char *name) {
  return p->o->dump_after && (!strcmp(p->o->dump_after, "all") || !strcmp(p->o->dump_after, name));
}

static void dump(pipe *p, const char *name, const char *label, void (*print)(pipe *, rx_strbuf *)) {
  if (!wants_dump(p, name)) return;
  rx_strbuf b = {0};
  base_strbuf_printf(&b, "// ---- after %s ----\n", label);
  print(p, &b);
  if (b.len && b.data[b.len - 1] != '\n') base_strbuf_putc(&b, '\n');
  out_text(p->o->dump_out, b.data);
  base_strbuf_free(&b);
}

static void print_module(pipe *p, rx_strbuf *b) { ir_module_print(b, p->m); }

static void time_row(pipe *p, const char *label, double ms, double verify_ms) {
  p->total_ms += ms + (verify_ms > 0 ? verify_ms : 0);
  if (!p->o->time_passes) return;
  if (verify_ms >= 0)
    base_strbuf_printf(&p->times, "  %-22s %10.3f %10.3f\n", label, ms, verify_ms);
  else
    base_strbuf_printf(&p->times, "  %-22s %10.3f %10s\n", label, ms, "-");
}

static bool input(rx_module *m, rx_diag *diag) { /* the verifier does the rest */
  return drv_weights_check_params(m, diag);
}

/* The library dispatch: large matmuls to the library of o->dispatch. */
static bool dispatch_pass(rx_module *m, const rx_compile_options *o, rx_diag *diag) {
  return pass_dispatch(m, &o->dispatch, diag);
}

/* The graph passes of RX_COMPILE_STEPS, in its order; step ids index the table. */
typedef struct graph_pass {
  const char *name;
  bool (*run)(rx_module *, rx_diag *);                                  /* G */
  bool (*run_opts)(rx_module *, const rx_compile_options *, rx_diag *); /* O */
} graph_pass;
#define PASS_ID(name, ...) STEP_##name,
enum { RX_COMPILE_STEPS(PASS_ID, PASS_ID, NO_STEP) NPASSES };
#define PASS_ROW(name, fn)      {#name, fn, NULL},
#define PASS_ROW_OPTS(name, fn) {#name, NULL, fn},
static const graph_pass graph_passes[NPASSES] = {
    RX_COMPILE_STEPS(PASS_ROW, PASS_ROW_OPTS, NO_STEP)};

/* A graph pass: run it, then the verifier between stages (normalize: struct info of what the
 * pass built, then verify), dump, time. The first step's verifier checks the user's module: its
 * errors are the user's (the step is named "verify"); after any later step a module that does not
 * verify is the compiler's bug. A step that reports an error stops the pipeline with only that
 * error. */
static bool after_step(pipe *p, const char *name, bool ok, double t0);
static bool step(pipe *p, int id) {
  const graph_pass *gp = &graph_passes[id];
  drv_progress_line(p->o, p->start_ms, "%s", gp->name);
  double t0 = now_ms();
  bool ok = gp->run ? gp->run(p->m, p->diag) : gp->run_opts(p->m, p->o, p->diag);
  return after_step(p, gp->name, ok && p->diag->errors == 0, t0);
}

/* The library dispatch, when asked for. */
static bool dispatch(pipe *p) {
  return p->o->dispatch.library == RX_DISPATCH_NONE || step(p, STEP_dispatch);
}

/* What follows a pass that began at t0 and returned ok. */
static bool after_step(pipe *p, const char *name, bool ok, double t0) {
  bool input = !strcmp(name, "verify");
  double t1 = now_ms();
  if (ok) {
    /* re-normalizing repeats the fallback warnings of the input (reported once, by the first
     * step): only errors are kept */
    rx_diag d;
    base_diag_init(&d);
    ok = ops_module_normalize(p->m, &d) && ir_module_verify(p->m, &d) && d.errors == 0;
    if (d.errors) {
      base_strbuf_append(&p->diag->text, rx_diag_text(&d));
      p->diag->errors += d.errors;
    }
    base_diag_free(&d);
    if (!ok && !input)
      base_diag_report(p->diag, RX_DIAG_ERROR, (rx_loc){0},
                       "internal error: the module does not normalize and verify after %s", name);
  }
  time_row(p, name, t1 - t0, now_ms() - t1);
  if (ok) dump(p, name, name, print_module);
  return ok;
}

/* ---- the steps that are not graph passes ---- */

static void print_plan(pipe *p, rx_strbuf *b) { pass_mem_plan_print(b, &p->r->plan); }

/* The name of storage s's first tenant (for messages). */
static const char *tenant(const rx_fn_plan *f, int s) {
  for (int i = 0; i < f->nallocs; i++)
    if (f->allocs[i].storage == s) return f->allocs[i].var->name;
  return "?";
}

/* Warns of a function whose storages at the bounds of its facts pass a target's device memory
 * (targets/target.h device_memory): naming the function, its facts, the targets, the largest
 * storages, and what to do. The plan still works below the bounds: the large storages are sized
 * at run time (RX_PLAN_MAX_STATIC_BYTES). */
static void warn_plan_size(pipe *p, const rx_fn_plan *f) {
  rx_strbuf over = {0};
  for (int t = 0; t < p->o->ntargets; t++) {
    const rx_target *tg = p->o->targets[t];
    if (f->upper_bytes > tg->device_memory)
      base_strbuf_printf(&over, "%s%s (%.1f GB)", over.len ? ", " : "", tg->name,
                         (double)tg->device_memory / 1e9);
  }
  if (!over.len) return;
  rx_strbuf msg = {0};
  base_strbuf_printf(&msg, "%s: memory planned at the bounds of its facts (", f->fn->name);
  for (int i = 0; i < f->fn->nfacts; i++) {
    if (i) base_strbuf_append(&msg, ", ");
    sym_expr_print(&msg, f->fn->facts[i]);
  }
  base_strbuf_printf(&msg, ") is %lld bytes (%.1f GB), more than the device memory of %s:",
                     (long long)f->upper_bytes, (double)f->upper_bytes / 1e9, over.data);
  bool *shown = base_calloc((size_t)f->nstorages + 1, sizeof *shown);
  for (int k = 0; k < 3; k++) { /* the three largest */
    int best = -1;
    for (int s = 0; s < f->nstorages; s++)
      if (!shown[s] && f->storage_upper[s] > 0 &&
          (best < 0 || f->storage_upper[s] > f->storage_upper[best]))
        best = s;
    if (best < 0) break;
    shown[best] = true;
    base_strbuf_printf(&msg, "%s storage %d (%s) %lld bytes", k ? "," : "", best, tenant(f, best),
                       (long long)f->storage_upper[best]);
  }
  int rest = 0;
  for (int s = 0; s < f->nstorages; s++) rest += !shown[s] && f->storage_upper[s] > 0;
  if (rest) base_strbuf_printf(&msg, " and %d more", rest);
  free(shown);
  base_diag_report(
      p->diag, RX_DIAG_WARNING, f->fn->loc,
      "%s; storages over %lld bytes are allocated at the sizes of each call, but a call "
      "near the bounds will not fit: give a tighter `where` bound (or --max-seq-len for "
      "a Hugging Face model)",
      msg.data, (long long)RX_PLAN_MAX_STATIC_BYTES);
  base_strbuf_free(&msg);
  base_strbuf_free(&over);
}

static bool plan_memory(pipe *p) {
  double t0 = now_ms();
  bool ok = pass_plan_memory(p->m, &p->r->plan, p->diag);
  for (int i = 0; ok && i < p->r->plan.nfns; i++) warn_plan_size(p, &p->r->plan.fns[i]);
  time_row(p, "plan_memory", now_ms() - t0, -1);
  if (ok) dump(p, "plan_memory", "plan_memory", print_plan);
  return ok;
}

static void print_host(pipe *p, rx_strbuf *b) {
  pass_host_disasm(b, p->r->host.words, p->r->host.nwords);
}
static bool lower_host(pipe *p) {
  double t0 = now_ms();
  bool ok = pass_lower_host(p->m, &p->r->plan, p->diag, &p->r->host);
  time_row(p, "lower_host", now_ms() - t0, -1);
  if (ok) dump(p, "lower_host", "lower_host", print_host);
  return ok;
}

/* schedule: a scheduled copy of every tensor program (the module keeps the originals) */
static void print_schedule(pipe *p, rx_strbuf *b) {
  const rx_target_output *to = &p->r->targets[p->cur];
  for (int i = 0; i < to->nprograms; i++) {
    base_strbuf_printf(b, "program %s:", to->programs[i]->name);
    for (int k = 0; k < to->kernels[i]->n; k++) {
      const rx_kernel *kn = to->kernels[i]->kernels[k];
      base_strbuf_printf(b, " %s (%s", kn->name, kn->rule ? kn->rule : "?");
      if (kn->cond) {
        base_strbuf_append(b, ", when ");
        sym_expr_print(b, kn->cond);
      }
      base_strbuf_append(b, ")");
    }
    base_strbuf_putc(b, '\n');
  }
}
static void print_kernels(pipe *p, rx_strbuf *b) {
  const rx_target_output *to = &p->r->targets[p->cur];
  for (int i = 0; i < to->nkernels; i++)
    base_strbuf_printf(b, "// ---- kernel %s ----\n%s", to->flat[i]->name, to->flat[i]->source);
}

static bool schedule_and_codegen(pipe *p, int ti) {
  rx_module *m = p->m;
  const rx_target *t = p->o->targets[ti];
  rx_target_output *to = &p->r->targets[ti];
  to->target = t;
  int np = 0;
  for (size_t i = 0; i < m->items.len; i++) np += m->items.data[i].kind == RX_ITEM_TENSOR;
  to->programs = ir_module_alloc(m, sizeof *to->programs * (size_t)(np + 1));
  to->kernels = ir_module_alloc(m, sizeof *to->kernels * (size_t)(np + 1));
  const char ***rules = ir_module_alloc(m, sizeof *rules * (size_t)(np + 1));
  int *nrules = ir_module_alloc(m, sizeof *nrules * (size_t)(np + 1));
  char label[64];
  const char *kind = tgt_target_kind_name(t->kind);
  double t0 = now_ms();
  bool ok = true;
  for (size_t i = 0; ok && i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_TENSOR) continue;
    rx_sched_result res = {0};
    ok = sched_schedule(m, m->items.data[i].fn, t, p->diag, &res);
    if (!ok) break;
    rules[to->nprograms] = ir_module_alloc(m, sizeof(char *) * (size_t)(res.nvariants + 1));
    for (int v = 0; v < res.nvariants; v++)
      rules[to->nprograms][v] = sched_rule_name(res.variants[v].rule);
    nrules[to->nprograms] = res.nvariants;
    to->programs[to->nprograms++] = res.fn;
  }
  snprintf(label, sizeof label, "schedule[%s]", kind);
  time_row(p, label, now_ms() - t0, -1);
  if (!ok) return false;
  t0 = now_ms();
  for (int i = 0; ok && i < to->nprograms; i++) {
    to->kernels[i] = ir_module_alloc(m, sizeof *to->kernels[i]);
    ok = cg_codegen_rules(m, to->programs[i], t, rules[i], nrules[i], p->diag, to->kernels[i]);
    if (ok) to->nkernels += to->kernels[i]->n;
  }
  snprintf(label, sizeof label, "codegen[%s]", kind);
  time_row(p, label, now_ms() - t0, -1);
  if (!ok) return false;
  to->flat = ir_module_alloc(m, sizeof *to->flat * (size_t)(to->nkernels + 1));
  int nf = 0;
  for (int i = 0; i < to->nprograms; i++)
    for (int k = 0; k < to->kernels[i]->n; k++) to->flat[nf++] = to->kernels[i]->kernels[k];
  /* kernel names become file names in the artifact: they must be unique */
  for (int i = 0; i < nf; i++)
    for (int j = 0; j < i; j++)
      if (!strcmp(to->flat[i]->name, to->flat[j]->name)) {
        base_diag_report(p->diag, RX_DIAG_ERROR, (rx_loc){0},
                         "two kernels are named '%s' for target %s (rename a tensor program)",
                         to->flat[i]->name, t->name);
        return false;
      }
  /* "<backend>/<kernel>.<arch>.cubin" must fit the 64-byte section names */
  for (int i = 0; i < nf; i++)
    if (strlen(kind) + strlen(to->flat[i]->name) + 16 >= 64) {
      base_diag_report(p->diag, RX_DIAG_ERROR, (rx_loc){0},
                       "kernel name '%s' is too long for the artifact (at most %d characters; "
                       "rename its tensor program)",
                       to->flat[i]->name, (int)(64 - 17 - strlen(kind)));
      return false;
    }
  p->cur = ti;
  dump(p, "schedule", "schedule", print_schedule);
  dump(p, "codegen", "codegen", print_kernels);
  return true;
}

static void print_manifest(pipe *p, rx_strbuf *b) { drv_artifact_manifest(b, p->m, p->r); }
static bool artifact(pipe *p) {
  double t0 = now_ms();
  p->r->nfunctions = p->r->plan.nfns;
  for (size_t i = 0; i < p->m->items.len; i++)
    p->r->nprograms += p->m->items.data[i].kind == RX_ITEM_TENSOR;
  drv_weights_layout(p->m, &p->r->weights);
  if (p->o->weights_file && p->r->weights.count) {
    rx_status st = drv_weights_ref(p->o->artifact_path ? p->o->artifact_path : "artifact.rxm",
                                   p->o->weights_file, &p->r->weights_ref);
    if (st) {
      base_diag_report(p->diag, RX_DIAG_ERROR, (rx_loc){0}, "%s", rx_status_message(st));
      rx_status_free(st);
      return false;
    }
  }
  drv_artifact_build(p->m, p->r, !p->o->stream_weights);
  time_row(p, "artifact", now_ms() - t0, -1);
  dump(p, "artifact", "artifact (manifest.json)", print_manifest);
  return true;
}

/* per target: schedule and codegen; then every target's kernels through their toolchains on
 * one pool of threads (driver/toolchains.c) */
static bool targets(pipe *p) {
  bool ok = true;
  for (int i = 0; ok && i < p->o->ntargets; i++) {
    p->r->ntargets = i + 1;
    drv_progress_line(p->o, p->start_ms, "schedule and codegen: %s",
                      tgt_target_kind_name(p->o->targets[i]->kind));
    ok = schedule_and_codegen(p, i);
  }
  if (!ok) return false;
  double t0 = now_ms();
  ok = drv_compile_toolchains(p->m, p->o, p->r, p->diag, p->o->time_passes ? &p->times : NULL,
                              p->start_ms);
  p->total_ms += now_ms() - t0;
  return ok;
}

static bool check_options(pipe *p) {
  const rx_compile_options *o = p->o;
  if (o->ntargets < 1 || o->ntargets > RX_COMPILE_MAX_TARGETS) {
    base_diag_report(p->diag, RX_DIAG_ERROR, (rx_loc){0},
                     "compile: between 1 and %d targets expected, got %d", RX_COMPILE_MAX_TARGETS,
                     o->ntargets);
    return false;
  }
  for (int i = 0; i < o->ntargets; i++)
    for (int j = 0; j < i; j++)
      if (o->targets[i]->kind == o->targets[j]->kind) {
        base_diag_report(p->diag, RX_DIAG_ERROR, (rx_loc){0},
                         "compile: targets '%s' and '%s' are both %s: one target per backend",
                         o->targets[j]->name, o->targets[i]->name,
                         tgt_target_kind_name(o->targets[i]->kind));
        return false;
      }
  bool cuda = false;
  for (int i = 0; i < o->ntargets; i++) cuda = cuda || o->targets[i]->kind == RX_TARGET_CUDA;
  if (o->dispatch.library == RX_DISPATCH_CUBLAS && !cuda) {
    base_diag_report(p->diag, RX_DIAG_ERROR, (rx_loc){0},
                     "compile: --dispatch cublas sends matmuls to cuBLASLt, a CUDA library: add a "
                     "cuda target or compile without --dispatch");
    return false;
  }
  if (o->dump_after && !drv_compile_step_known(o->dump_after)) {
    base_diag_report(p->diag, RX_DIAG_ERROR, (rx_loc){0},
                     "compile: unknown step '%s' for --dump-after", o->dump_after);
    return false;
  }
  return true;
}

static int count_programs(const rx_module *m) {
  int n = 0;
  for (size_t i = 0; i < m->items.len; i++) n += m->items.data[i].kind == RX_ITEM_TENSOR;
  return n;
}

/* dedup, and under --time-passes how many programs it merged */
static bool dedup(pipe *p) {
  int before = count_programs(p->m);
  if (!step(p, STEP_dedup)) return false;
  int after = count_programs(p->m);
  if (p->o->time_passes)
    base_strbuf_printf(&p->times, "    (%d tensor programs, %d after merging equal ones)\n", before,
                       after);
  return true;
}

static bool fuse(pipe *p) {
  return p->o->no_fuse || (step(p, STEP_fuse_ops) && step(p, STEP_fuse_tensor));
}

bool drv_compile(rx_module *m, const rx_compile_options *o, rx_diag *diag, rx_compile_result *out) {
  memset(out, 0, sizeof *out);
  pipe p = {.m = m, .o = o, .diag = diag, .r = out, .start_ms = now_ms()};
  if (o->time_passes)
    base_strbuf_printf(&p.times, "  %-22s %10s %10s\n", "step", "ms", "verify ms");
  bool ok = check_options(&p) && step(&p, STEP_verify) /* normalize + verify the input */
            && step(&p, STEP_shard)                    /* global view -> a rank's program */
            && step(&p, STEP_fold)                     /* constants and shape expressions */
            && step(&p, STEP_cse) && step(&p, STEP_dce) &&
            dispatch(&p)                       /* large matmuls to a library */
            && step(&p, STEP_legalize)         /* op calls -> call_tensor */
            && step(&p, STEP_annotate)         /* patterns from the loop level */
            && fuse(&p)                        /* fuse_ops, fuse_tensor */
            && step(&p, STEP_dce) && dedup(&p) /* programs equal up to names */
            && step(&p, STEP_names)            /* kernel and file names */
            && plan_memory(&p)                 /* storages at the upper bounds */
            && lower_host(&p)                  /* the host program */
            && targets(&p)                     /* per target: schedule, codegen; toolchains */
            && artifact(&p);                   /* the .rxm bytes */
  drv_progress_line(o, p.start_ms, NULL);
  if (o->time_passes) {
    rx_strbuf tb = {0};
    base_strbuf_append(&tb, "relaxc: time per step\n");
    if (p.times.data) base_strbuf_append(&tb, p.times.data);
    base_strbuf_printf(&tb, "  %-22s %10.3f\n", "total", p.total_ms);
    out_text(o->time_out, tb.data);
    base_strbuf_free(&tb);
  }
  base_strbuf_free(&p.times);
  return ok && diag->errors == 0;
}

bool drv_pass_known(const char *name) {
  for (int i = 0; i < NPASSES; i++)
    if (!strcmp(name, graph_passes[i].name)) return true;
  return false;
}

bool drv_pass_run(rx_module *m, const char *name, const rx_compile_options *o, rx_diag *diag) {
  pipe p = {.m = m, .o = o, .diag = diag, .start_ms = now_ms()};
  for (int i = 0; i < NPASSES; i++) {
    if (strcmp(name, graph_passes[i].name)) continue;
    bool ok = step(&p, i);
    base_strbuf_free(&p.times);
    return ok && diag->errors == 0;
  }
  base_diag_report(diag, RX_DIAG_ERROR, (rx_loc){0}, "unknown graph pass '%s'", name);
  return false;
}

void drv_compile_result_free(rx_compile_result *r) {
  if (!r) return;
  pass_host_program_free(&r->host);
  free(r->artifact);
  drv_weights_image_free(&r->weights);
  free(r->weights_ref);
  memset(r, 0, sizeof *r);
}
