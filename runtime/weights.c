/* runtime/weights.c: an artifact's weights (docs/artifact.md, "Weights"): the section
 * weights.safetensors, or the side file that manifest.json names (relative to the artifact's
 * directory, mapped, checked against the size and CRC-32 the manifest records); the safetensors
 * header checked by base/safetensors.c; the parameters the manifest binds to weights, checked
 * against their CHECK_TENSOR; and, with a device, one device buffer per weight, uploaded once at
 * load (never one buffer for all: Vulkan drivers cap a storage buffer, lavapipe at 128 MiB).
 * Also the mapping of files (the artifact itself is mapped, not copied) and the public accessors.
 * Every error starts with the artifact's name and names the weight and what was expected. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/safetensors.h"
#include "runtime/vm.h"

struct vm_weights {
  rx_st_file st;       /* the parsed header: tensor i is weight i */
  uint8_t *map;        /* the side file's mapping, or NULL (the section) */
  size_t map_size;     /* its bytes */
  char *file;          /* the side file's path as opened (heap), or NULL */
  rx_rt_value **value; /* per weight: its tensor on the device (NULL without one) */
  uint32_t **bound;    /* per function, per parameter: the weight bound to it, or VM_NONE */
  uint32_t *nbound;    /* per function: how many parameters are bound */
};

/* ---- files ---- */
rx_status vm_map_file(const char *path, const char *what, uint8_t **out, size_t *out_size) {
  *out = NULL;
  *out_size = 0;
  /* never blocking: a name from a manifest may be a FIFO, which is refused below */
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0)
    return base_status_make(RX_ERR_NOT_FOUND, "cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  rx_status s = NULL;
  if (fstat(fd, &st) != 0) {
    s = base_status_make(RX_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
  } else if (S_ISDIR(st.st_mode)) { /* a directory opens, and its size means nothing */
    s = base_status_make(RX_ERR_INVALID, "%s: is a directory, not %s", path, what);
  } else if (!S_ISREG(st.st_mode)) { /* a device or a pipe: no size to map */
    s = base_status_make(RX_ERR_INVALID, "%s: is not a regular file, so not %s", path, what);
  } else if (st.st_size > 0) {
    if ((uint64_t)st.st_size > SIZE_MAX) {
      s = base_status_make(RX_ERR_OUT_OF_MEMORY, "'%s' is larger than the address space", path);
    } else {
      void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED)
        s = base_status_make(RX_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
      else
        *out = p, *out_size = (size_t)st.st_size;
    }
  }
  close(fd);
  return s;
}

void vm_unmap(void *p, size_t size) {
  if (p && size) munmap(p, size);
}

/* ---- the manifest's "weights" and the side file ---- */
static rx_status wbad(const rx_rt_artifact *a, const char *fmt, ...) RX_PRINTF(2, 3);
static rx_status wbad(const rx_rt_artifact *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rx_status s = base_status_vmake(RX_ERR_INVALID, fmt, ap);
  va_end(ap);
  return base_status_annotate(s, "%s", a->name);
}

static bool json_u64(const cJSON *o, const char *key, uint64_t *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0) ||
      v->valuedouble != (double)(uint64_t)v->valuedouble)
    return false;
  *out = (uint64_t)v->valuedouble;
  return true;
}

/* Does the relative path ref climb out of its folder ("..", "a/../..")? */
static bool leaves_folder(const char *ref) {
  int depth = 0;
  for (const char *p = ref; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      if (--depth < 0) return true;
    } else if (n && !(n == 1 && p[0] == '.')) {
      depth++;
    }
    p += n + (p[n] == '/');
  }
  return false;
}

/* Maps the side file the manifest's "weights" names, relative to the artifact's directory (the
 * directory of its name as given), and checks its size and CRC-32 against the manifest. */
static rx_status map_side_file(rx_rt_artifact *a, vm_weights *W, const cJSON *mw, const char *ref) {
  uint64_t bytes = 0, crc = 0;
  if (!json_u64(mw, "file_bytes", &bytes) || !json_u64(mw, "crc32", &crc) || crc > 0xffffffffu)
    return wbad(a,
                "manifest.json: \"weights\" names the file '%s' without its file_bytes and "
                "crc32",
                ref);
  if (ref[0] == '/' || leaves_folder(ref))
    return wbad(a,
                "manifest.json: \"weights\" names the file '%s', %s; the side file must lie in "
                "the artifact's folder",
                ref, ref[0] == '/' ? "an absolute path" : "a path out of the artifact's folder");
  const char *slash = strrchr(a->name, '/');
  rx_strbuf path = {0}, dir = {0};
  if (slash) base_strbuf_printf(&path, "%.*s/", (int)(slash - a->name), a->name);
  base_strbuf_printf(&dir, "%.*s", slash ? (int)(slash - a->name + 1) : 1, slash ? a->name : ".");
  base_strbuf_append(&path, ref);
  W->file = rt_strdup(&a->alloc, path.data);
  base_strbuf_free(&path);
  if (!W->file) {
    base_strbuf_free(&dir);
    return rt_oom("a file name", strlen(ref));
  }
  rx_status s = vm_map_file(W->file, "a weights file", &W->map, &W->map_size);
  if (!s) s = base_path_check_inside(W->file, dir.data, false); /* a symlink that leads out */
  base_strbuf_free(&dir);
  if (s) {
    rx_status r = base_status_make(rx_status_code_of(s),
                                   "%s: the weights file its manifest names (relative to the "
                                   "artifact): %s",
                                   a->name, rx_status_message(s));
    rx_status_free(s);
    return r;
  }
  if (W->map_size != bytes)
    return wbad(a,
                "the weights file '%s' has %zu bytes, the artifact expects %llu (a file of "
                "another compilation?)",
                W->file, W->map_size, (unsigned long long)bytes);
  uint32_t got = rx_rt_crc32(0, W->map, W->map_size);
  if (got != (uint32_t)crc)
    return wbad(a,
                "the weights file '%s' is corrupted: its CRC32 is 0x%08x, the manifest records "
                "0x%08x",
                W->file, got, (unsigned)crc);
  return NULL;
}

/* The safetensors image: the section, or the side file the manifest names. */
static rx_status find_image(rx_rt_artifact *a, vm_weights *W, const cJSON *mw, const uint8_t **out,
                            size_t *out_size, char *where, size_t where_size) {
  const vm_section *sec = NULL;
  for (size_t i = 0; i < a->nsections && !sec; i++)
    if (!strcmp(a->sections[i].name, RXM_WEIGHTS_SECTION)) sec = &a->sections[i];
  const cJSON *file = cJSON_GetObjectItemCaseSensitive(mw, "file");
  if (cJSON_IsString(file) && file->valuestring[0]) {
    if (sec)
      return wbad(a, "it has a section '%s' and its manifest names a weights file too",
                  RXM_WEIGHTS_SECTION);
    RX_RETURN_IF_ERROR(map_side_file(a, W, mw, file->valuestring));
    *out = W->map;
    *out_size = W->map_size;
    snprintf(where, where_size, "%s: weights file %s", a->name, W->file);
    return NULL;
  }
  if (!sec && mw)
    return wbad(a,
                "its manifest lists weights, but it has no section '%s' and names no weights "
                "file",
                RXM_WEIGHTS_SECTION);
  *out = sec ? sec->data : NULL;
  *out_size = sec ? sec->size : 0;
  snprintf(where, where_size, "%s: %s", a->name, RXM_WEIGHTS_SECTION);
  return NULL;
}

rx_status vm_weights_parse(rx_rt_artifact *a) {
  cJSON *m = cJSON_Parse(a->manifest); /* valid JSON: checked by the loader */
  if (!m) return rt_oom("the manifest", strlen(a->manifest));
  const cJSON *mw = cJSON_GetObjectItemCaseSensitive(m, "weights");
  if (mw && !cJSON_IsObject(mw)) mw = NULL;
  vm_weights *W = rt_alloc(&a->alloc, sizeof *W);
  rx_status s = W ? NULL : rt_oom("the weights", sizeof *W);
  const uint8_t *img = NULL;
  size_t size = 0;
  char where[1100];
  if (!s) {
    a->weights = W;
    s = find_image(a, W, mw, &img, &size, where, sizeof where);
  }
  uint64_t tensors = 0;
  if (!s && img) s = base_st_parse(img, size, where, &W->st);
  if (!s && img && mw && json_u64(mw, "tensors", &tensors) && tensors != W->st.ntensors)
    s = wbad(a, "its manifest lists %llu weights, %s holds %zu", (unsigned long long)tensors,
             W->file ? W->file : RXM_WEIGHTS_SECTION, W->st.ntensors);
  if (!s && W->st.ntensors) {
    W->value = rt_alloc(&a->alloc, W->st.ntensors * sizeof *W->value);
    if (!W->value) s = rt_oom("the weights", W->st.ntensors * sizeof *W->value);
  }
  cJSON_Delete(m);
  return s;
}

/* ---- lookups ---- */
bool vm_weight_find(const rx_rt_artifact *a, const char *name, uint32_t *out) {
  const vm_weights *W = a->weights;
  for (size_t i = 0; W && i < W->st.ntensors; i++)
    if (!strcmp(W->st.tensors[i].name, name)) {
      if (out) *out = (uint32_t)i;
      return true;
    }
  return false;
}

/* "f32[8, 16]" of weight i. */
static void weight_type(char *buf, size_t size, const rx_st_tensor *t) {
  vm_format_type(buf, size, t->dtype, t->ndim, t->shape);
}

/* ---- bindings: the manifest's "weight" of a parameter, checked against its CHECK_TENSOR ---- */

/* Does weight t agree with the CHECK_TENSOR at code[pc]: its dtype, rank and constant dims
 * (symbolic dims are checked when the function runs)? */
static bool fits_check(const uint32_t *code, uint32_t pc, const rx_st_tensor *t) {
  /* check_tensor reg param name expected dtype ndim dims... */
  const uint32_t *w = code + pc;
  if (w[5] != RX_DTYPE_UNKNOWN && w[5] != (uint32_t)t->dtype) return false;
  if (w[6] == VM_NONE) return true;
  if (w[6] != (uint32_t)t->ndim) return false;
  for (uint32_t d = 0, p = 7; d < w[6]; d++, p += w[p] == RXVM_DIM_CONST ? 3 : 2)
    if (w[p] == RXVM_DIM_CONST &&
        ((uint64_t)w[p + 1] | (uint64_t)w[p + 2] << 32) != (uint64_t)t->shape[d])
      return false;
  return true;
}

/* Parameter `param` (its manifest entry p) of function fi bound to the weight p names. */
static rx_status bind_param(rx_rt_artifact *a, uint32_t fi, size_t param, const cJSON *p) {
  vm_weights *W = a->weights;
  const vm_fn *f = &a->fns[fi];
  const cJSON *wn = cJSON_GetObjectItemCaseSensitive(p, "weight");
  if (!wn) return NULL;
  if (!cJSON_IsString(wn))
    return wbad(a, "manifest.json: %s: parameter %zu: \"weight\" is not a name", f->name, param);
  uint32_t wi;
  if (!vm_weight_find(a, wn->valuestring, &wi))
    return wbad(a,
                "%s: parameter %zu is bound to weight '%.200s', which the artifact does not "
                "hold",
                f->name, param, wn->valuestring);
  uint32_t pc = f->param_check[param];
  const rx_st_tensor *t = &W->st.tensors[wi];
  char have[256];
  weight_type(have, sizeof have, t);
  if (pc == VM_NONE)
    return wbad(a, "%s: parameter %zu is bound to weight '%s' (%s), but it is not a tensor",
                f->name, param, t->name, have);
  if (!fits_check(f->code, pc, t))
    return wbad(a, "%s: parameter '%s' (%s) is bound to weight '%s', which is %s", f->name,
                a->strings[f->code[pc + 3]], a->strings[f->code[pc + 4]], t->name, have);
  if (W->bound[fi][param] == VM_NONE) W->nbound[fi]++;
  W->bound[fi][param] = wi;
  return NULL;
}

rx_status vm_weights_bind(rx_rt_artifact *a) {
  vm_weights *W = a->weights;
  W->bound = rt_alloc(&a->alloc, (a->nfns + 1) * sizeof *W->bound);
  W->nbound = rt_alloc(&a->alloc, (a->nfns + 1) * sizeof *W->nbound);
  if (!W->bound || !W->nbound) return rt_oom("the weights' bindings", a->nfns);
  for (size_t i = 0; i < a->nfns; i++) {
    W->bound[i] = rt_alloc(&a->alloc, (a->fns[i].nparams + 1) * sizeof **W->bound);
    if (!W->bound[i]) return rt_oom("the weights' bindings", a->fns[i].nparams);
    for (uint32_t k = 0; k < a->fns[i].nparams; k++) W->bound[i][k] = VM_NONE;
  }
  cJSON *m = cJSON_Parse(a->manifest);
  if (!m) return rt_oom("the manifest", strlen(a->manifest));
  rx_status s = NULL;
  const cJSON *fns = cJSON_GetObjectItemCaseSensitive(m, "functions"), *mf;
  if (!cJSON_IsArray(fns)) fns = NULL;
  cJSON_ArrayForEach(mf, fns) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(mf, "name");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(mf, "params"), *p;
    uint32_t fi = 0;
    while (cJSON_IsString(name) && fi < a->nfns && strcmp(a->fns[fi].name, name->valuestring)) fi++;
    if (!cJSON_IsString(name) || fi == a->nfns || !cJSON_IsArray(params)) continue;
    if ((size_t)cJSON_GetArraySize(params) != a->fns[fi].nparams) {
      s = wbad(a, "manifest.json: function '%s' has %d parameters, its host program %u",
               a->fns[fi].name, cJSON_GetArraySize(params), a->fns[fi].nparams);
      break;
    }
    size_t k = 0;
    cJSON_ArrayForEach(p, params) {
      if ((s = bind_param(a, fi, k++, p))) break;
    }
    if (s) break;
  }
  cJSON_Delete(m);
  return s;
}

/* ---- upload: one buffer per weight ---- */
rx_status vm_weights_upload(rx_rt_artifact *a) {
  vm_weights *W = a->weights;
  for (size_t i = 0; i < W->st.ntensors; i++) {
    const rx_st_tensor *t = &W->st.tensors[i];
    rx_rt_tensor *tensor = NULL;
    rx_status s = rx_rt_tensor_from_host(a->device, t->dtype, t->ndim, t->shape,
                                         W->st.data + t->offset, &tensor);
    if (!s) tensor->buffer->kept = true; /* rx_rt_buffer_kept: every call reads it */
    rx_rt_value *v = s ? NULL : vm_value_new(&a->alloc, RX_RT_VALUE_TENSOR);
    if (!s && !v) s = rt_oom("a value", sizeof *v);
    if (s) {
      rx_rt_tensor_release(tensor);
      char ty[256];
      weight_type(ty, sizeof ty, t);
      rx_status r = base_status_make(
          rx_status_code_of(s), "%s: uploading weight '%s' (%s, %llu bytes) to %s: %s", a->name,
          t->name, ty, (unsigned long long)t->size,
          a->device->info.name[0] ? a->device->info.name
                                  : rx_rt_backend_name(a->device->info.backend),
          rx_status_message(s));
      rx_status_free(s);
      return r;
    }
    v->tensor = tensor;
    W->value[i] = v;
  }
  return NULL;
}

void vm_weights_free(rx_rt_artifact *a) {
  vm_weights *W = a->weights;
  if (!W) return;
  for (size_t i = 0; W->value && i < W->st.ntensors; i++) rx_rt_value_release(W->value[i]);
  rt_free(&a->alloc, W->value);
  for (size_t i = 0; W->bound && i < a->nfns; i++) rt_free(&a->alloc, W->bound[i]);
  rt_free(&a->alloc, W->bound);
  rt_free(&a->alloc, W->nbound);
  base_st_free(&W->st);
  vm_unmap(W->map, W->map_size);
  rt_free(&a->alloc, W->file);
  rt_free(&a->alloc, W);
  a->weights = NULL;
}

/* ---- what calls and the VM use ---- */
uint32_t vm_weights_bound(const rx_rt_artifact *a, uint32_t fi) {
  return a->weights && a->weights->nbound ? a->weights->nbound[fi] : 0;
}

rx_rt_value *vm_param_weight(const rx_rt_artifact *a, uint32_t fi, uint32_t param) {
  const vm_weights *W = a->weights;
  if (!W || !W->bound || W->bound[fi][param] == VM_NONE) return NULL;
  return W->value[W->bound[fi][param]];
}

rx_rt_value *vm_weight_value(const rx_rt_artifact *a, const char *name) {
  uint32_t i;
  return vm_weight_find(a, name, &i) ? a->weights->value[i] : NULL;
}

/* ---- inspection (relaxc/runtime.h) ---- */
size_t rx_rt_artifact_weight_count(const rx_rt_artifact *a) {
  return a && a->weights ? a->weights->st.ntensors : 0;
}

bool rx_rt_artifact_weight(const rx_rt_artifact *a, size_t i, rx_rt_weight_info *out_info) {
  memset(out_info, 0, sizeof *out_info);
  if (i >= rx_rt_artifact_weight_count(a)) return false;
  const rx_st_tensor *t = &a->weights->st.tensors[i];
  out_info->name = t->name;
  out_info->dtype = t->dtype;
  out_info->ndim = t->ndim;
  out_info->shape = t->shape;
  out_info->bytes = (size_t)t->size;
  rx_rt_value *v = a->weights->value ? a->weights->value[i] : NULL;
  out_info->tensor = v ? rx_rt_value_tensor(v) : NULL;
  return true;
}

const char *rx_rt_artifact_weights_file(const rx_rt_artifact *a) {
  return a && a->weights ? a->weights->file : NULL;
}

bool rx_rt_artifact_param_weight(const rx_rt_artifact *a, size_t fn, size_t param,
                                 size_t *out_weight) {
  if (out_weight) *out_weight = 0;
  if (!a || !a->weights || !a->weights->bound || fn >= a->nfns || param >= a->fns[fn].nparams ||
      a->weights->bound[fn][param] == VM_NONE)
    return false;
  if (out_weight) *out_weight = a->weights->bound[fn][param];
  return true;
}
