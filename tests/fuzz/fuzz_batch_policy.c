/* tests/fuzz/fuzz_batch_policy.c: libFuzzer harness of the batcher's FSM table reader
 * (rx_rt_batcher_policy_load's bytes, runtime/autobatch_policy.c: rt_abp_load), for batchers of 1
 * to 3 registered functions. A table it accepts must give, in every state, a function with ready
 * calls, and save back to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/autobatch_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const names[3] = {"lstm_cell", "tree_cell", "gru_cell"};
  uint8_t *bytes = malloc(size ? size : 1);
  if (!bytes) return 0;
  if (size) memcpy(bytes, data, size);
  for (size_t nfns = 1; nfns <= 3; nfns++) {
    rt_abp_fsm fsm = {0};
    rx_status s = rt_abp_load(&rt_default_allocator, bytes, size, names, nfns, &fsm);
    if (!s) {
      size_t count[RT_ABP_MAX_FNS];
      for (size_t st = 0; st < fsm.nstates; st++) {
        bool any = false;
        for (size_t f = 0, v = st; f < nfns; f++, v /= RT_ABP_BUCKETS) {
          count[f] = v % RT_ABP_BUCKETS == 3 ? 4 : v % RT_ABP_BUCKETS; /* in its bucket */
          any |= count[f] > 0;
        }
        if (rt_abp_encode(count, nfns) != st) abort();
        size_t f = rt_abp_choose(RX_RT_BATCH_FSM, &fsm, count, nfns, 0);
        if (any && (f >= nfns || !count[f])) abort();
      }
      size_t len = 0;
      uint8_t *back = malloc(size);
      rx_status s2 = back ? rt_abp_save(&fsm, names, back, size, &len) : NULL;
      if (back && (s2 || len != size || memcmp(back, bytes, size) != 0)) abort();
      rx_status_free(s2);
      free(back);
      rt_abp_fsm_free(&rt_default_allocator, &fsm);
    }
    rx_status_free(s);
  }
  free(bytes);
  return 0;
}
