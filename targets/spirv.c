/* toolchains: SPIR-V validation and disassembly with SPIRV-Tools (its C API, libspirv.h).
 *
 * Built only where targets.cmake found SPIRV-Tools (RX_HAVE_SPIRV_TOOLS); elsewhere every call
 * says how to get it. */
#include "toolchain.h"

#include <stdlib.h>
#include <string.h>

#if defined(RX_HAVE_SPIRV_TOOLS)
#include <spirv-tools/libspirv.h>
#endif

bool tgt_spirv_tools_available(void) {
#if defined(RX_HAVE_SPIRV_TOOLS)
  return true;
#else
  return false;
#endif
}

#if defined(RX_HAVE_SPIRV_TOOLS)

const char *tgt_spirv_tools_id(void) { return spvSoftwareVersionDetailsString(); }

/* The diagnostic's text with where it points, "(no message)" when there is none. */
static rx_status diag_status(rx_status_code code, const char *what, spv_diagnostic d) {
  rx_status s;
  if (d && d->error && d->error[0]) {
    if (d->isTextSource)
      s = base_status_make(code, "%s: %s", what, d->error);
    else
      s = base_status_make(code, "%s at word %zu: %s", what, d->position.index, d->error);
  } else {
    s = base_status_make(code, "%s (SPIRV-Tools gave no message)", what);
  }
  return s;
}

static rx_status check_words(const uint32_t *words, size_t nwords) {
  if (!words || nwords < 5)
    return base_status_make(
        RX_ERR_INVALID, "invalid SPIR-V: %zu words, expected at least the 5-word header", nwords);
  return NULL;
}

rx_status tgt_spirv_validate(const uint32_t *words, size_t nwords) {
  RX_RETURN_IF_ERROR(check_words(words, nwords));
  spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
  if (!ctx) return base_status_make(RX_ERR_INTERNAL, "spvContextCreate(SPV_ENV_VULKAN_1_2) failed");
  spv_validator_options opts = spvValidatorOptionsCreate();
  spv_const_binary_t bin = {words, nwords};
  spv_diagnostic diag = NULL;
  spv_result_t r = spvValidateWithOptions(ctx, opts, &bin, &diag);
  rx_status st = NULL;
  if (r != SPV_SUCCESS)
    st = diag_status(RX_ERR_INVALID, "SPIR-V validation (Vulkan 1.2) failed", diag);
  spvDiagnosticDestroy(diag);
  spvValidatorOptionsDestroy(opts);
  spvContextDestroy(ctx);
  return st;
}

rx_status tgt_spirv_disassemble(const uint32_t *words, size_t nwords, char **out_text) {
  *out_text = NULL;
  RX_RETURN_IF_ERROR(check_words(words, nwords));
  spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
  if (!ctx) return base_status_make(RX_ERR_INTERNAL, "spvContextCreate(SPV_ENV_VULKAN_1_2) failed");
  spv_text text = NULL;
  spv_diagnostic diag = NULL;
  uint32_t options = SPV_BINARY_TO_TEXT_OPTION_NO_HEADER | SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES;
  spv_result_t r = spvBinaryToText(ctx, words, nwords, options, &text, &diag);
  rx_status st = NULL;
  if (r != SPV_SUCCESS || !text)
    st = diag_status(RX_ERR_INVALID, "SPIR-V disassembly failed", diag);
  else
    *out_text = base_strndup(text->str, text->length);
  spvTextDestroy(text);
  spvDiagnosticDestroy(diag);
  spvContextDestroy(ctx);
  return st;
}

#else

const char *tgt_spirv_tools_id(void) { return "absent"; }

static rx_status missing(const char *what) {
  return base_status_make(RX_ERR_UNSUPPORTED,
                          "cannot %s: relaxc was built without SPIRV-Tools; install spirv-tools "
                          "(Debian) and reconfigure",
                          what);
}

rx_status tgt_spirv_validate(const uint32_t *words, size_t nwords) {
  (void)words;
  (void)nwords;
  return missing("validate SPIR-V");
}

rx_status tgt_spirv_disassemble(const uint32_t *words, size_t nwords, char **out_text) {
  (void)words;
  (void)nwords;
  *out_text = NULL;
  return missing("disassemble SPIR-V");
}

#endif
