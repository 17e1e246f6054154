/* frontends/hf/quant_config.c: config.json's quantization_config, the format the checkpoint's
 * projections are stored in as the quantization tools write them (issue 32), mapped to a scheme
 * of base/quant.h that quant_matmul reads in place:
 *
 *   AutoAWQ      {"quant_method": "awq", "version": "gemm", "bits": 4, "group_size": G,
 *                 "zero_point": true, "modules_to_not_convert": [...] or null}   -> awq_gG
 *   GPTQ         {"quant_method": "gptq", "bits": 4, "group_size": G or -1, "desc_act": b,
 *                 "sym": b, "checkpoint_format": "gptq" | "gptq_v2", "lm_head": false}
 *                 -> gptq / gptq_v2 (the groups come from g_idx, whatever G and desc_act are)
 *   compressed-tensors  {"quant_method": "compressed-tensors", "format": "float-quantized",
 *                 "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8,
 *                 "type": "float", "strategy": "tensor" | "channel", "symmetric": true,
 *                 "dynamic": false, ...}, "input_activations": null}}, "ignore": [...]}
 *                 -> fp8_e4m3 / fp8_e4m3_ch
 *
 * Everything else is refused by name, with what was expected: another method (bitsandbytes,
 * transformers' block-wise "fp8", ...), AWQ's other versions or zero_point false, GPTQ with 2, 3
 * or 8 bits, a quantized lm_head, activations quantized statically or dynamically, a second config
 * group. Weights only: activations stay in the compute dtype. */
#include "hf_int.h"

#include <cjson/cJSON.h>
#include <string.h>

static const cJSON *qkey(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return v && !cJSON_IsNull(v) ? v : NULL;
}

static const char *qstr(const cJSON *o, const char *k) {
  const cJSON *v = qkey(o, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* An integer key; def when absent, INT32_MIN when not an integer. */
static int qint(const cJSON *o, const char *k, int def) {
  const cJSON *v = qkey(o, k);
  if (!v) return def;
  return cJSON_IsNumber(v) && v->valuedouble == (int)v->valuedouble ? (int)v->valuedouble
                                                                    : INT32_MIN;
}

static bool qbool(const cJSON *o, const char *k, bool def) {
  const cJSON *v = qkey(o, k);
  return v ? cJSON_IsTrue(v) : def;
}

#define QFAIL(...) base_status_make(RX_ERR_UNSUPPORTED, __VA_ARGS__)

/* A list of module names kept dense (key k of o: AWQ's modules_to_not_convert, compressed-
 * tensors' ignore, whose "re:" entries relaxc reads when they are ".*NAME" or ".*NAME$"). */
static rx_status keep_list(const cJSON *o, const char *k, const char *file, rx_hf_config *c) {
  const cJSON *l = qkey(o, k), *it;
  if (!l) return NULL;
  if (!cJSON_IsArray(l))
    return base_status_make(RX_ERR_INVALID, "%s: quantization_config.%s: expected a list of names",
                            file, k);
  cJSON_ArrayForEach(it, l) {
    if (!cJSON_IsString(it) || c->nqkeep >= (int)RX_ARRAY_LEN(c->qkeep))
      return base_status_make(RX_ERR_INVALID,
                              "%s: quantization_config.%s: expected at most %d module names", file,
                              k, (int)RX_ARRAY_LEN(c->qkeep));
    const char *n = it->valuestring;
    bool suffix = false;
    if (!strncmp(n, "re:", 3)) {
      size_t len = strlen(n);
      if (strncmp(n + 3, ".*", 2) || strpbrk(n + 5, "*+?[](){}|\\^") ||
          (strchr(n + 5, '$') && n[len - 1] != '$') || len - (n[len - 1] == '$') <= 5)
        return QFAIL("%s: quantization_config.%s: the pattern '%.80s' is not read (relaxc reads "
                     "names and the patterns \"re:.*NAME\" and \"re:.*NAME$\")",
                     file, k, n);
      n += 5;
      suffix = true;
    }
    size_t len = strlen(n) - (suffix && n[strlen(n) - 1] == '$');
    if (len == 0 || len >= sizeof c->qkeep[0])
      return base_status_make(RX_ERR_INVALID,
                              "%s: quantization_config.%s: name '%.80s' of %zu "
                              "characters (expected 1 to %zu)",
                              file, k, it->valuestring, len, sizeof c->qkeep[0] - 1);
    memcpy(c->qkeep[c->nqkeep], n, len);
    c->qkeep[c->nqkeep][len] = 0;
    c->qkeep_suffix[c->nqkeep++] = suffix;
  }
  return NULL;
}

static rx_status read_awq(const cJSON *q, const char *file, rx_hf_config *c) {
  const char *v = qstr(q, "version");
  int bits = qint(q, "bits", 4), g = qint(q, "group_size", 128);
  if (!v || strcmp(v, "gemm"))
    return QFAIL("%s: quantization_config: AWQ version '%.40s' is not supported (relaxc reads "
                 "version \"gemm\", AutoAWQ's default; GEMV, Marlin and ExLlama layouts are "
                 "others)",
                 file, v ? v : "(none)");
  if (bits != 4) return QFAIL("%s: quantization_config: AWQ with bits %d (expected 4)", file, bits);
  if (!qbool(q, "zero_point", true))
    return QFAIL("%s: quantization_config: AWQ with zero_point false is not supported (expected "
                 "zero points: W = (q - z) s)",
                 file);
  char name[16];
  snprintf(name, sizeof name, "awq_g%d", g);
  if (!base_quant_lookup(name, &c->qscheme))
    return QFAIL("%s: quantization_config: AWQ group_size %d is not supported (expected 32, 64 "
                 "or 128)",
                 file, g);
  return keep_list(q, "modules_to_not_convert", file, c);
}

static rx_status read_gptq(const cJSON *q, const char *file, rx_hf_config *c) {
  int bits = qint(q, "bits", 4), g = qint(q, "group_size", 128);
  const char *fmt = qstr(q, "checkpoint_format");
  if (!fmt) fmt = "gptq";
  if (bits != 4)
    return QFAIL("%s: quantization_config: GPTQ with bits %d is not supported (expected 4)", file,
                 bits);
  if (g != -1 && g < 8)
    return base_status_make(RX_ERR_INVALID,
                            "%s: quantization_config: GPTQ group_size %d (expected -1 or at least "
                            "8)",
                            file, g);
  if (qbool(q, "lm_head", false))
    return QFAIL("%s: quantization_config: GPTQ with a quantized lm_head is not supported (the "
                 "output layer stays dense)",
                 file);
  if (qkey(q, "dynamic") && cJSON_GetArraySize(qkey(q, "dynamic")) > 0)
    return QFAIL("%s: quantization_config: GPTQModel's per-module \"dynamic\" overrides are not "
                 "supported",
                 file);
  c->qgroup = g;
  if (!strcmp(fmt, "gptq"))
    c->qscheme = RX_QUANT_GPTQ4;
  else if (!strcmp(fmt, "gptq_v2"))
    c->qscheme = RX_QUANT_GPTQ4_V2;
  else
    return QFAIL("%s: quantization_config: GPTQ checkpoint_format '%.40s' is not supported "
                 "(expected \"gptq\" or \"gptq_v2\")",
                 file, fmt);
  return keep_list(q, "modules_to_not_convert", file, c);
}

static rx_status read_compressed(const cJSON *q, const char *file, rx_hf_config *c) {
  const char *fmt = qstr(q, "format");
  const cJSON *groups = qkey(q, "config_groups");
  if (!fmt || strcmp(fmt, "float-quantized"))
    return QFAIL("%s: quantization_config: compressed-tensors format '%.40s' is not supported "
                 "(relaxc reads \"float-quantized\": FP8 weights)",
                 file, fmt ? fmt : "(none)");
  if (!cJSON_IsObject(groups) || cJSON_GetArraySize(groups) != 1)
    return QFAIL("%s: quantization_config.config_groups: expected one group (got %d)", file,
                 cJSON_IsObject(groups) ? cJSON_GetArraySize(groups) : 0);
  const cJSON *g0 = groups->child, *w = qkey(g0, "weights");
  if (qkey(g0, "input_activations") || qkey(g0, "output_activations"))
    return QFAIL("%s: quantization_config.config_groups.%s: quantized activations are not "
                 "supported (relaxc reads weight-only FP8: input_activations null)",
                 file, g0->string);
  const char *type = qstr(w, "type"), *strat = qstr(w, "strategy");
  if (!w || !type || strcmp(type, "float") || qint(w, "num_bits", 0) != 8)
    return QFAIL("%s: quantization_config.config_groups.%s.weights: expected type \"float\" and "
                 "num_bits 8 (FP8 e4m3)",
                 file, g0->string);
  if (qbool(w, "dynamic", false) || !qbool(w, "symmetric", true) || qkey(w, "block_structure"))
    return QFAIL("%s: quantization_config.config_groups.%s.weights: dynamic, asymmetric or "
                 "block-wise FP8 weights are not supported",
                 file, g0->string);
  if (strat && !strcmp(strat, "tensor"))
    c->qscheme = RX_QUANT_FP8_E4M3;
  else if (strat && !strcmp(strat, "channel"))
    c->qscheme = RX_QUANT_FP8_E4M3_CH;
  else
    return QFAIL("%s: quantization_config.config_groups.%s.weights: strategy '%.40s' is not "
                 "supported (expected \"tensor\" or \"channel\")",
                 file, g0->string, strat ? strat : "(none)");
  const cJSON *t = qkey(g0, "targets");
  if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) != 1 || !cJSON_IsString(t->child) ||
      strcmp(t->child->valuestring, "Linear"))
    return QFAIL("%s: quantization_config.config_groups.%s.targets: expected [\"Linear\"]", file,
                 g0->string);
  return keep_list(q, "ignore", file, c);
}

rx_status hf_read_quant_config(const cJSON *root, const char *file, rx_hf_config *c) {
  const cJSON *q = qkey(root, "quantization_config");
  c->quantized = false;
  c->nqkeep = 0;
  if (!q) return NULL;
  const char *m = qstr(q, "quant_method");
  if (!cJSON_IsObject(q) || !m)
    return base_status_make(
        RX_ERR_INVALID, "%s: quantization_config: expected an object with a quant_method", file);
  snprintf(c->qmethod, sizeof c->qmethod, "%s", m);
  rx_status s;
  if (!strcmp(m, "awq"))
    s = read_awq(q, file, c);
  else if (!strcmp(m, "gptq"))
    s = read_gptq(q, file, c);
  else if (!strcmp(m, "compressed-tensors"))
    s = read_compressed(q, file, c);
  else if (!strcmp(m, "fp8"))
    s = QFAIL("%s: quantization_config: transformers' block-wise \"fp8\" (weight_block_size, "
              "weight_scale_inv) is not supported yet (relaxc reads awq, gptq and "
              "compressed-tensors' float-quantized FP8)",
              file);
  else
    s = QFAIL("%s: quantization_config: quant_method '%.40s' is not supported (relaxc reads awq, "
              "gptq and compressed-tensors' float-quantized FP8)",
              file, m);
  if (!s) c->quantized = true;
  return s;
}

bool hf_quant_keeps_dense(const rx_hf_config *c, const char *module) {
  size_t ml = strlen(module);
  for (int i = 0; i < c->nqkeep; i++) {
    size_t kl = strlen(c->qkeep[i]);
    if (c->qkeep_suffix[i] ? ml >= kl && !strcmp(module + ml - kl, c->qkeep[i])
                           : strstr(module, c->qkeep[i]) != NULL)
      return true;
  }
  return false;
}
