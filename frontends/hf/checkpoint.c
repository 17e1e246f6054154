/* frontends/hf/checkpoint.c: the weights of a Hugging Face folder: model.safetensors, or the
 * shards that model.safetensors.index.json lists, each mapped read-only and parsed by
 * base/safetensors.c. The mappings live as long as the module that takes their tensors. */
#include "hf_int.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HF_MAX_SHARDS 4096 /* far past the largest published checkpoints (a few hundred) */

struct hf_ckpt {
  size_t n;
  char **paths; /* per file, for messages */
  rx_mapped_file *maps;
  rx_st_file *st;
};

void hf_ckpt_close(void *p) {
  hf_ckpt *c = p;
  if (!c) return;
  for (size_t i = 0; i < c->n; i++) {
    base_st_free(&c->st[i]);
    base_unmap_file(&c->maps[i]);
    free(c->paths[i]);
  }
  free(c->paths);
  free(c->maps);
  free(c->st);
  free(c);
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static rx_status add_file(hf_ckpt *c, const char *path) {
  for (size_t i = 0; i < c->n; i++)
    if (!strcmp(c->paths[i], path)) return NULL; /* a shard named twice in the index */
  if (c->n >= HF_MAX_SHARDS)
    return base_status_make(RX_ERR_INVALID, "%s: more than %d weight files", path, HF_MAX_SHARDS);
  size_t i = c->n;
  c->paths = base_realloc(c->paths, (i + 1) * sizeof *c->paths);
  c->maps = base_realloc(c->maps, (i + 1) * sizeof *c->maps);
  c->st = base_realloc(c->st, (i + 1) * sizeof *c->st);
  c->paths[i] = base_strdup(path);
  memset(&c->maps[i], 0, sizeof c->maps[i]);
  memset(&c->st[i], 0, sizeof c->st[i]);
  c->n++;
  RX_RETURN_IF_ERROR(base_map_file(path, &c->maps[i]));
  return base_st_parse(c->maps[i].data, c->maps[i].size, path, &c->st[i]);
}

/* The shard files of model.safetensors.index.json ("weight_map": {tensor: file}). */
static rx_status add_index(hf_ckpt *c, const char *dir, const char *index) {
  char *text = NULL;
  size_t len = 0;
  RX_RETURN_IF_ERROR(base_read_file(index, &text, &len));
  cJSON *root;
  rx_status ps = hf_json_object(text, len, index, &root); /* a syntax error's line and column */
  free(text);
  RX_RETURN_IF_ERROR(ps);
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
  if (!map || !cJSON_IsObject(map)) {
    cJSON_Delete(root);
    return base_status_make(RX_ERR_INVALID,
                            "%s: expected a \"weight_map\" object ({\"tensor name\": \"shard "
                            "file\", ...})",
                            index);
  }
  rx_status s = NULL;
  const cJSON *it;
  cJSON_ArrayForEach(it, map) {
    if (!cJSON_IsString(it) || strchr(it->valuestring, '/') || !strcmp(it->valuestring, "..")) {
      s = base_status_make(RX_ERR_INVALID,
                           "%s: weight_map entry '%.200s' must name a file in the model folder",
                           index, it->string ? it->string : "?");
      break;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, it->valuestring);
    if ((s = add_file(c, path))) break;
  }
  cJSON_Delete(root);
  return s;
}

rx_status hf_ckpt_open(const char *dir, hf_ckpt **out) {
  *out = NULL;
  hf_ckpt *c = base_calloc(1, sizeof *c);
  char single[4096], index[4096];
  snprintf(single, sizeof single, "%s/model.safetensors", dir);
  snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
  rx_status s;
  if (exists(index))
    s = add_index(c, dir, index);
  else if (exists(single))
    s = add_file(c, single);
  else
    s = base_status_make(RX_ERR_NOT_FOUND,
                         "%s: no model.safetensors or model.safetensors.index.json (PyTorch .bin "
                         "checkpoints are not read: save with safe_serialization=True)",
                         dir);
  if (s) {
    hf_ckpt_close(c);
    return s;
  }
  *out = c;
  return NULL;
}

static const rx_st_tensor *find_exact(const hf_ckpt *c, const char *name,
                                      const uint8_t **out_data) {
  for (size_t i = 0; i < c->n; i++) {
    const rx_st_tensor *t = base_st_find(&c->st[i], name);
    if (t) {
      *out_data = c->st[i].data + t->offset;
      return t;
    }
  }
  *out_data = NULL;
  return NULL;
}

/* The text model of a multimodal checkpoint (Gemma3ForConditionalGeneration, docs/llm.md): its
 * decoder under language_model.model.* (the hub's files, and transformers 5's save_pretrained)
 * or model.language_model.* (transformers' modules), its output layer under
 * language_model.lm_head.*; a name the builder asks for ("model.*", "lm_head.*") is looked up
 * there when the checkpoint does not hold it. The vision tower's tensors are never read. */
static const struct {
  const char *from, *to;
} TEXT_PREFIXES[] = {{"model.", "language_model.model."},
                     {"model.", "model.language_model."},
                     {"lm_head.", "language_model.lm_head."}};

const rx_st_tensor *hf_ckpt_find(const hf_ckpt *c, const char *name, const uint8_t **out_data) {
  const rx_st_tensor *t = find_exact(c, name, out_data);
  for (size_t i = 0; !t && i < RX_ARRAY_LEN(TEXT_PREFIXES); i++) {
    size_t n = strlen(TEXT_PREFIXES[i].from);
    if (strncmp(name, TEXT_PREFIXES[i].from, n)) continue;
    char alt[512];
    if (snprintf(alt, sizeof alt, "%s%s", TEXT_PREFIXES[i].to, name + n) < (int)sizeof alt)
      t = find_exact(c, alt, out_data);
  }
  return t;
}

const char *hf_ckpt_files(const hf_ckpt *c, rx_strbuf *out) {
  for (size_t i = 0; i < c->n; i++) {
    const char *base = strrchr(c->paths[i], '/');
    base_strbuf_printf(out, "%s%s", i ? ", " : "", base ? base + 1 : c->paths[i]);
  }
  return out->data ? out->data : "";
}
