/* relaxc inspect MODEL.gguf (tools/cmd_inspect.c hands a file that starts with GGUF's magic here):
 * the version, alignment and data section; every metadata key with its type and value (strings
 * cut at INSPECT_STR_MAX bytes, arrays longer than INSPECT_ARRAY_MAX shown as their count and first
 * elements: a tokenizer's vocabulary is a line); every tensor with its shape (relaxc's order,
 * outermost first), type and bytes; the tensors and bytes of each weight format in total. The file
 * is read by frontends/gguf/gguf.c, so a corrupt one is refused with the reader's message. */
#include "commands.h"

#include "base/base.h"
#include "frontends/gguf/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A string value longer than this is cut (chat templates run to kilobytes). */
#define INSPECT_STR_MAX 64
/* An array longer than this shows its count and its first INSPECT_ARRAY_HEAD elements. */
#define INSPECT_ARRAY_MAX  16
#define INSPECT_ARRAY_HEAD 4

/* s quoted, control bytes and quotes escaped, cut after INSPECT_STR_MAX bytes. */
static void put_string(const char *s, uint64_t len) {
  putchar('"');
  for (uint64_t i = 0; i < len && i < INSPECT_STR_MAX; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c == '\n')
      fputs("\\n", stdout);
    else if (c < 0x20 || c == 0x7f)
      printf("\\x%02x", c);
    else
      putchar(c);
  }
  putchar('"');
  if (len > INSPECT_STR_MAX) printf("... (%llu bytes)", (unsigned long long)len);
}

static void put_scalar(const rx_gguf_value *v) {
  switch (v->type) {
  case RX_GGUF_V_INT8:
  case RX_GGUF_V_INT16:
  case RX_GGUF_V_INT32:
  case RX_GGUF_V_INT64:
    printf("%lld", (long long)v->v.i);
    break;
  case RX_GGUF_V_FLOAT32:
  case RX_GGUF_V_FLOAT64:
    printf("%.9g", v->v.f);
    break;
  case RX_GGUF_V_BOOL:
    fputs(v->v.u ? "true" : "false", stdout);
    break;
  case RX_GGUF_V_STRING:
    put_string(v->str, v->len);
    break;
  default:
    printf("%llu", (unsigned long long)v->v.u);
    break;
  }
}

static void put_value(const rx_gguf_value *v) {
  if (v->type != RX_GGUF_V_ARRAY) {
    printf("%s ", gguf_vtype_name(v->type));
    put_scalar(v);
    return;
  }
  bool cut = v->count > INSPECT_ARRAY_MAX;
  uint64_t shown = cut ? INSPECT_ARRAY_HEAD : v->count;
  printf("array of %llu %s [", (unsigned long long)v->count, gguf_vtype_name(v->elem));
  for (uint64_t i = 0; i < shown; i++) {
    rx_gguf_value e = gguf_array_at(v, i);
    if (i) fputs(", ", stdout);
    put_scalar(&e);
  }
  printf("%s]", cut ? ", ..." : "");
}

static void put_tensors(const rx_gguf_file *f) {
#define NTYPES 64 /* above every GGML type number (RX_GGUF_TYPES) */
  unsigned long long bytes[NTYPES] = {0}, total = 0;
  size_t count[NTYPES] = {0};
  printf("tensors: %zu (shapes outermost first: GGUF's ne[] reversed)\n", f->ntensors);
  for (size_t i = 0; i < f->ntensors; i++) {
    const rx_gguf_tensor *t = &f->tensors[i];
    rx_strbuf shape = {0};
    base_strbuf_putc(&shape, '[');
    for (int d = 0; d < t->ndim; d++)
      base_strbuf_printf(&shape, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    base_strbuf_putc(&shape, ']');
    printf("  %-32s %-5s %-20s %12llu bytes\n", t->name, gguf_type_name(t->type), shape.data,
           (unsigned long long)t->size);
    base_strbuf_free(&shape);
    RX_ASSERT((int)t->type < NTYPES);
    bytes[t->type] += t->size;
    count[t->type]++;
    total += t->size;
  }
  printf("bytes per weight format:\n");
  for (int k = 0; k < NTYPES; k++)
    if (count[k])
      printf("  %-5s %zu tensor%s, %llu bytes\n", gguf_type_name((uint32_t)k), count[k],
             count[k] == 1 ? "" : "s", bytes[k]);
  printf("  total %zu tensor%s, %llu bytes\n", f->ntensors, f->ntensors == 1 ? "" : "s", total);
}

bool cli_inspect_is_gguf(const char *path) {
  FILE *fp = fopen(path, "rb");
  unsigned char magic[4] = {0};
  size_t n = fp ? fread(magic, 1, sizeof magic, fp) : 0;
  if (fp) fclose(fp);
  return gguf_is_gguf(magic, n);
}

int cli_inspect_gguf(const char *path) {
  rx_mapped_file m = {0};
  rx_gguf_file f;
  rx_status s = base_map_file(path, &m);
  if (!s) s = gguf_parse(m.data, m.size, path, &f);
  if (s) {
    fprintf(stderr, "relaxc: error: %s\n", rx_status_message(s));
    rx_status_free(s);
    base_unmap_file(&m);
    return 1;
  }
  printf("%s: GGUF version %u, %zu bytes, %zu metadata keys, %zu tensors; data section at byte "
         "%llu (alignment %u)\n",
         path, f.version, m.size, f.nkvs, f.ntensors, (unsigned long long)f.data_offset,
         f.alignment);
  printf("metadata:\n");
  for (size_t i = 0; i < f.nkvs; i++) {
    printf("  %s: ", f.kvs[i].key);
    put_value(&f.kvs[i].value);
    putchar('\n');
  }
  put_tensors(&f);
  gguf_free(&f);
  base_unmap_file(&m);
  return 0;
}
