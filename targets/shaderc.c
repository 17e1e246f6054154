/* toolchains: GLSL 450 compute shaders to SPIR-V, in process, with shaderc.
 *
 * Built only where targets.cmake found shaderc (RX_HAVE_SHADERC); elsewhere every call says
 * how to get it. */
#include "target.h"
#include "toolchain.h"

#include <stdlib.h>
#include <string.h>

#if defined(RX_HAVE_SHADERC)
#include <shaderc/shaderc.h>
#endif

bool tgt_shaderc_available(void) {
#if defined(RX_HAVE_SHADERC)
  return true;
#else
  return false;
#endif
}

#ifndef RX_SHADERC_VERSION
#define RX_SHADERC_VERSION "unknown"
#endif

/* every option tgt_glsl_to_spirv sets, so a change of them changes the cache key */
const char *tgt_shaderc_id(void) {
  return "shaderc " RX_SHADERC_VERSION " glsl compute vulkan1.2 spirv1.5 performance";
}

#if defined(RX_HAVE_SHADERC)

/* Line `line` (1-based) of text[0..len): its start and length; false when out of range. */
static bool source_line(const char *text, size_t len, long line, const char **out_s,
                        size_t *out_n) {
  const char *p = text, *end = text + len;
  for (long i = 1; i < line; i++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) return false;
    p = nl + 1;
  }
  if (p >= end && line > 1) return false;
  const char *nl = memchr(p, '\n', (size_t)(end - p));
  *out_s = p;
  *out_n = (size_t)((nl ? nl : end) - p);
  return true;
}

/* shaderc's messages ("NAME:LINE: error: ...") with each offending GLSL line quoted after its
 * message, so the reader sees the emitted code without opening it. */
static char *annotate(const char *msg, const char *name, const char *text, size_t len) {
  rx_strbuf b = {0};
  size_t name_len = strlen(name);
  const char *p = msg;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    base_strbuf_appendn(&b, p, n);
    base_strbuf_putc(&b, '\n');
    if (n > name_len + 1 && memcmp(p, name, name_len) == 0 && p[name_len] == ':') {
      char *after = NULL;
      long line = strtol(p + name_len + 1, &after, 10);
      const char *ls;
      size_t ln;
      if (after != p + name_len + 1 && *after == ':' && line > 0 &&
          source_line(text, len, line, &ls, &ln))
        base_strbuf_printf(&b, "  %5ld | %.*s\n", line, (int)ln, ls);
    }
    p = nl ? nl + 1 : p + n;
  }
  /* drop the final newline */
  if (b.len && b.data[b.len - 1] == '\n') b.data[--b.len] = '\0';
  return base_strbuf_take(&b);
}

rx_status tgt_glsl_to_spirv(const char *glsl, size_t len, const char *name, uint32_t **out_words,
                            size_t *out_nwords) {
  *out_words = NULL;
  *out_nwords = 0;
  if (!name) name = "kernel.comp";
  shaderc_compiler_t compiler = shaderc_compiler_initialize();
  if (!compiler)
    return base_status_make(RX_ERR_INTERNAL, "%s: shaderc_compiler_initialize failed", name);
  shaderc_compile_options_t opts = shaderc_compile_options_initialize();
  if (!opts) {
    shaderc_compiler_release(compiler);
    return base_status_make(RX_ERR_INTERNAL, "%s: shaderc_compile_options_initialize failed", name);
  }
  shaderc_compile_options_set_source_language(opts, shaderc_source_language_glsl);
  shaderc_compile_options_set_target_env(opts, shaderc_target_env_vulkan,
                                         shaderc_env_version_vulkan_1_2);
  shaderc_compile_options_set_target_spirv(opts, shaderc_spirv_version_1_5);
  shaderc_compile_options_set_optimization_level(opts, shaderc_optimization_level_performance);

  shaderc_compilation_result_t res =
      shaderc_compile_into_spv(compiler, glsl, len, shaderc_compute_shader, name,
                               tgt_target_kind_entry(RX_TARGET_VULKAN), opts);
  rx_status st = NULL;
  shaderc_compilation_status cs =
      res ? shaderc_result_get_compilation_status(res) : shaderc_compilation_status_internal_error;
  if (cs != shaderc_compilation_status_success) {
    const char *msg = res ? shaderc_result_get_error_message(res) : "";
    char *text = annotate(msg && *msg ? msg : "(shaderc gave no message)", name, glsl, len);
    st = base_status_make(cs == shaderc_compilation_status_compilation_error ? RX_ERR_INVALID
                                                                             : RX_ERR_INTERNAL,
                          "GLSL to SPIR-V failed for %s:\n%s", name, text);
    free(text);
  } else {
    size_t bytes = shaderc_result_get_length(res);
    if (bytes == 0 || bytes % 4 != 0) {
      st = base_status_make(RX_ERR_INTERNAL,
                            "%s: shaderc returned %zu bytes, not whole SPIR-V words", name, bytes);
    } else {
      *out_words = base_malloc(bytes);
      memcpy(*out_words, shaderc_result_get_bytes(res), bytes);
      *out_nwords = bytes / 4;
    }
  }
  if (res) shaderc_result_release(res);
  shaderc_compile_options_release(opts);
  shaderc_compiler_release(compiler);
  return st;
}

#else

rx_status tgt_glsl_to_spirv(const char *glsl, size_t len, const char *name, uint32_t **out_words,
                            size_t *out_nwords) {
  (void)glsl;
  (void)len;
  *out_words = NULL;
  *out_nwords = 0;
  return base_status_make(RX_ERR_UNSUPPORTED,
                          "cannot compile %s to SPIR-V: relaxc was built without shaderc; install "
                          "libshaderc-dev (Debian) and reconfigure",
                          name ? name : "GLSL");
}

#endif
