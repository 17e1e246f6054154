/* driver/batch_policy.c: the batcher's FSM table carried in the artifact
 * (rx_module_set_batch_policy, include/relaxc/compiler.h; relaxc compile --batch-policy TABLE). The
 * table is learned from the calls of sample runs (rx_rt_batcher_train, runtime/autobatch_policy.c)
 * and saved as bytes; here it is checked with the runtime's own reader, so that the compiler
 * refuses what the runtime would, and its function names against the module, then handed to the
 * artifact writer as a section (ir/sections.c). docs/autobatch.md, "The FSM table in the artifact".
 */
#include "driver.h"

#include "relaxc/compiler.h"
#include "runtime/autobatch_policy.h"

#include <string.h>

rx_status rx_module_set_batch_policy(rx_module *m, const void *bytes, size_t len,
                                     const char *where) {
  const char *w = where && *where ? where : "batch policy";
  if (!m) return base_status_make(RX_ERR_INVALID, "%s: the module is NULL", w);
  rt_abp_table t;
  RX_RETURN_IF_ERROR(rt_abp_parse(bytes, len, w, &t));
  for (size_t f = 0; f < t.nfns; f++) {
    char name[256];
    size_t n = t.name_len[f] < sizeof name ? t.name_len[f] : sizeof name - 1;
    memcpy(name, t.name[f], n);
    name[n] = '\0';
    if (n != t.name_len[f] || memchr(name, '\0', n) || !ir_module_graph_fn(m, name))
      return base_status_make(RX_ERR_INVALID,
                              "%s: the FSM table's function %zu, '%.64s', is not a graph function "
                              "of the module (a table learned for another model?)",
                              w, f, name);
  }
  return ir_module_add_section(m, RT_ABP_SECTION, bytes, len);
}
