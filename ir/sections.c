/* ir/sections.c: the named blobs a module hands to the artifact writer (ir.h, rx_section). */
#include "ir.h"

#include <string.h>

/* The artifact's section names: RXM_SECTION_NAME_BYTES (64) with the NUL; the writer's own
 * sections ("manifest.json", "host.rxvm", "weights.safetensors", "<backend>/...") keep the
 * names with '/' and those three. */
#define SECTION_NAME_MAX 63

rx_status ir_module_add_section(rx_module *m, const char *name, const void *data, size_t size) {
  size_t n = name ? strlen(name) : 0;
  bool ok = n > 0 && n <= SECTION_NAME_MAX && !strchr(name, '/') && strcmp(name, "manifest.json") &&
            strcmp(name, "host.rxvm") && strcmp(name, "weights.safetensors");
  for (size_t i = 0; ok && i < n; i++) ok = name[i] > ' ' && name[i] < 127;
  if (!ok)
    return base_status_make(RX_ERR_INVALID,
                            "section name '%.80s': expected 1 to %d printable bytes without '/', "
                            "not a name the artifact uses itself",
                            name ? name : "", SECTION_NAME_MAX);
  rx_section sec = {ir_module_intern(m, name, n),
                    size ? base_arena_dup(&m->arena, data, size) : (const uint8_t *)"", size};
  for (size_t i = 0; i < m->sections.len; i++)
    if (m->sections.data[i].name == sec.name) {
      m->sections.data[i] = sec;
      return NULL;
    }
  RX_VEC_PUSH(&m->sections, sec);
  return NULL;
}

size_t ir_module_section_count(const rx_module *m) { return m->sections.len; }

const rx_section *ir_module_section_at(const rx_module *m, size_t i) {
  return i < m->sections.len ? &m->sections.data[i] : NULL;
}
