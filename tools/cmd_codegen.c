/* relaxc codegen FILE.rx --target T [-o DIR]: parse, normalize and verify FILE, schedule every
 * tensor program for T (passes/schedule.h; an already scheduled program is kept as written),
 * generate its kernels (codegen/codegen.h) and either print the sources on stdout, each after a
 * line `// ---- kernel NAME ----`, or write into DIR each kernel's source (NAME.cu, NAME.comp,
 * NAME.metal), its binaries where the toolchain is present (NAME.spv; NAME.ptx and
 * NAME.sm_XX.cubin with NVRTC, else a note on stderr) and kernels.json (docs/kernel-abi.md); DIR
 * and its missing parents are created. */
#include "commands.h"

#include "codegen/codegen.h"
#include "ir/ir.h"
#include "passes/schedule.h"
#include "targets/target.h"
#include "targets/toolchain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool write_file(const char *dir, const char *name, const void *data, size_t len) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *path = base_malloc(n);
  snprintf(path, n, "%s/%s", dir, name);
  rx_status st = tgt_tc_write_file(path, data, len);
  free(path);
  if (st) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(st));
    rx_status_free(st);
    return false;
  }
  return true;
}

/* The SPIR-V of GLSL kernel k (shaderc, then spirv-val where SPIRV-Tools is present) written to
 * dir as NAME.spv (tgt_target_binary_name); *noted once shaderc is absent (the GLSL alone is
 * written then). */
static bool write_spirv(rx_module *m, rx_kernel *k, const rx_target *t, const char *dir,
                        bool *noted) {
  if (!tgt_shaderc_available()) {
    if (!*noted)
      fputs("relaxc: note: relaxc was built without shaderc: no SPIR-V written\n", stderr);
    *noted = true;
    return true;
  }
  char label[300];
  snprintf(label, sizeof label, "%s.comp", k->name);
  uint32_t *words = NULL;
  size_t n = 0;
  rx_status st = tgt_glsl_to_spirv(k->source, strlen(k->source), label, &words, &n);
  if (!st && tgt_spirv_tools_available()) st = tgt_spirv_validate(words, n);
  if (st) {
    fprintf(stderr, "relaxc: error: kernel '%s': %s\n", k->name, rx_status_message(st));
    rx_status_free(st);
    free(words);
    return false;
  }
  char *file = tgt_target_binary_name(&m->arena, t, k->name);
  bool ok = write_file(dir, file, words, n * sizeof *words);
  if (ok) k->binary = file;
  free(words);
  return ok;
}

/* NVRTC binaries of one CUDA kernel, NAME.ptx and NAME.ARCH.cubin (tgt_target_asm_name,
 * tgt_target_binary_name); returns false only on a compile error. */
static bool write_cuda_binaries(rx_module *m, rx_kernel *k, const rx_target *t, const char *dir,
                                bool *nvrtc_ok, bool *noted) {
  if (!*nvrtc_ok) return true;
  rx_status st = tgt_nvrtc_load(NULL, NULL);
  if (st) {
    if (!*noted)
      fprintf(stderr, "relaxc: note: no CUDA binaries written (%s)\n", rx_status_message(st));
    *noted = true;
    *nvrtc_ok = false;
    rx_status_free(st);
    return true;
  }
  char label[256];
  snprintf(label, sizeof label, "%s.cu", k->name);
  char *ptx = NULL, *bin = NULL;
  size_t ptx_len = 0, len = 0;
  bool ok = true;
  /* one NVRTC call gives both (the PTX is what a compute_XX compilation gives) */
  st = tgt_nvrtc_compile_both(k->source, label, t->cuda_arch, &ptx, &ptx_len, &bin, &len, NULL);
  if (!st) {
    char *file = tgt_target_asm_name(&m->arena, t, k->name);
    ok = write_file(dir, file, ptx, ptx_len);
    if (ok) k->ptx = file;
  }
  if (!st && ok) {
    char *file = tgt_target_binary_name(&m->arena, t, k->name);
    ok = write_file(dir, file, bin, len);
    if (ok) k->binary = file;
  }
  if (st) {
    fprintf(stderr, "relaxc: error: kernel '%s': %s\n", k->name, rx_status_message(st));
    rx_status_free(st);
    ok = false;
  }
  free(ptx);
  free(bin);
  return ok;
}

int cli_cmd_codegen(const rx_cli_command *cmd, int argc, char **argv) {
  const char *file = NULL, *target = NULL, *outdir = NULL;
  rx_cli_args it = cli_begin(cmd, argc, argv);
  while (cli_next(&it)) {
    if (!it.flag) {
      if (file) return cli_usage_error(cmd, "'codegen' takes one FILE, got '%s' too", it.value);
      file = it.value;
    } else if (!strcmp(it.flag, "--target")) {
      target = it.value;
    } else if (!strcmp(it.flag, "-o")) {
      outdir = it.value;
    } else {
      return cli_unhandled(&it);
    }
  }
  if (it.status >= 0) return it.status;
  if (!file)
    return cli_usage_error(cmd, "%s", "'codegen' needs a FILE (or '-' for standard input)");
  if (!target)
    return cli_usage_error(cmd, "%s",
                           "'codegen' needs --target (e.g. cuda, vulkan-lavapipe, metal)");
  const rx_target *t = NULL;
  rx_status st = tgt_target_parse(target, &t);
  if (st) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(st));
    rx_status_free(st);
    return 2;
  }
  if (outdir && !cli_make_dir(outdir)) return 1; /* before any work */
  size_t len = 0;
  char *text = cli_read_input(file, RX_FILE_TEXT_IR, &len);
  if (!text) return 1;
  rx_module *m = rx_module_new();
  rx_diag diag;
  base_diag_init(&diag);
  bool ok = ir_parse_module(m, strcmp(file, "-") ? file : "<stdin>", text, len, &diag) &&
            ops_module_normalize(m, &diag) && ir_module_verify(m, &diag) && diag.errors == 0;
  RX_VEC(const rx_tensor_fn *) progs = {0};
  RX_VEC(rx_kernel_list *) lists = {0};
  for (size_t i = 0; ok && i < m->items.len; i++) {
    if (m->items.data[i].kind != RX_ITEM_TENSOR) continue;
    const rx_tensor_fn *f = m->items.data[i].fn;
    rx_sched_result res = {0};
    if (!sched_schedule(m, f, t, &diag, &res)) {
      ok = false;
      break;
    }
    const char **rules = ir_module_alloc(m, sizeof(char *) * (size_t)(res.nvariants + 1));
    for (int v = 0; v < res.nvariants; v++) rules[v] = sched_rule_name(res.variants[v].rule);
    rx_kernel_list *kl = ir_module_alloc(m, sizeof *kl);
    if (!cg_codegen_rules(m, res.fn, t, rules, res.nvariants, &diag, kl)) {
      ok = false;
      break;
    }
    RX_VEC_PUSH(&progs, res.fn);
    RX_VEC_PUSH(&lists, kl);
  }
  fputs(rx_diag_text(&diag), stderr);
  if (ok && !outdir) {
    for (size_t i = 0; i < lists.len; i++)
      for (int j = 0; j < lists.data[i]->n; j++)
        printf("// ---- kernel %s ----\n%s", lists.data[i]->kernels[j]->name,
               lists.data[i]->kernels[j]->source);
  } else if (ok) {
    bool nvrtc_ok = true, noted = false;
    rx_lang lang = cg_lang_of_target(t);
    for (size_t i = 0; ok && i < lists.len; i++) {
      for (int j = 0; ok && j < lists.data[i]->n; j++) {
        rx_kernel *k = lists.data[i]->kernels[j];
        char name[300];
        snprintf(name, sizeof name, "%s.%s", k->name, cg_lang_ext(lang));
        ok = write_file(outdir, name, k->source, strlen(k->source));
        if (ok && lang == RX_LANG_GLSL) ok = write_spirv(m, k, t, outdir, &noted);
        if (ok && lang == RX_LANG_CUDA)
          ok = write_cuda_binaries(m, k, t, outdir, &nvrtc_ok, &noted);
      }
    }
    if (ok && lang == RX_LANG_MSL)
      fputs("relaxc: note: Metal libraries are not built here (xcrun metal is macOS only)\n",
            stderr);
    if (ok) {
      rx_strbuf json = {0};
      cg_kernels_json(&json, t, progs.data, (const rx_kernel_list *const *)lists.data,
                      (int)progs.len);
      ok = write_file(outdir, "kernels.json", json.data, json.len);
      base_strbuf_free(&json);
    }
  }
  free(progs.data);
  free(lists.data);
  base_diag_free(&diag);
  rx_module_free(m);
  free(text);
  return ok ? 0 : 1;
}
