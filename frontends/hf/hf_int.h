/* frontends/hf/hf_int.h: what the files of frontends/hf/ share (internal). */
#ifndef RX_FRONTENDS_HF_INT_H
#define RX_FRONTENDS_HF_INT_H

#include "../../base/safetensors.h"
#include "hf.h"
#include "relaxc/compiler.h"

/* ---- the checkpoint (checkpoint.c) ---- */
typedef struct hf_ckpt hf_ckpt;
/* Maps and parses DIR's model.safetensors, or every shard its index names. */
rx_status hf_ckpt_open(const char *dir, hf_ckpt **out);
/* Unmaps everything (a module's rx_module_on_free callback). */
void hf_ckpt_close(void *c);
/* The tensor named name in any file, its bytes in *out_data; NULL when absent. */
const rx_st_tensor *hf_ckpt_find(const hf_ckpt *c, const char *name, const uint8_t **out_data);
/* "model-00001-of-00002.safetensors, ..." into out, for messages. */
const char *hf_ckpt_files(const hf_ckpt *c, rx_strbuf *out);

/* ---- the artifact's sections for generation (meta.c) ---- */
/* llm.json (the model's functions, vocabulary, special tokens, limits and KV cache geometry) and
 * the folder's tokenizer.json when there is one. */
rx_status hf_add_sections(rx_module *m, const char *dir, const rx_hf_config *c, rx_dtype t,
                          int64_t max_len, int64_t max_batch);

#endif
