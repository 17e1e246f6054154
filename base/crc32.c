/* base/crc32.c: CRC-32 as zlib computes it (base.h, base_crc32_update), the one implementation of
 * the compiler's artifact writer and the runtime's loader. Slicing by 8 (eight tables of 256
 * words, eight bytes a step): the weights of an artifact run to GBs, and the loader checks every
 * byte, so the table-a-byte loop (about a tenth of the speed) would dominate a load.
 *
 * The tables are built at the first call. A call that finds them unbuilt builds its own copy on
 * the stack and uses that; the first such call also publishes its copy (an atomic claim, then a
 * release store), so concurrent first calls never write the shared tables at the same time. */
#include "base.h"

#include <stdatomic.h>
#include <string.h>

#define CRC_POLY 0xEDB88320u /* zlib's, reflected */

typedef uint32_t crc_tables[8][256];

static crc_tables shared;
static atomic_int state; /* 0: not built, 1: being published, 2: ready */

static void build(crc_tables t) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? CRC_POLY ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (int k = 1; k < 8; k++)
    for (uint32_t i = 0; i < 256; i++) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
}

static uint32_t rd32le(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t update(const crc_tables t, uint32_t crc, const unsigned char *p, size_t n) {
  uint32_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint32_t lo = rd32le(p) ^ c, hi = rd32le(p + 4);
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
  }
  for (; n; p++, n--) c = t[0][(c ^ *p) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t base_crc32_update(uint32_t crc, const void *data, size_t n) {
  if (atomic_load_explicit(&state, memory_order_acquire) == 2)
    return update((const uint32_t(*)[256])shared, crc, data, n);
  crc_tables local;
  build(local);
  int expected = 0;
  if (atomic_compare_exchange_strong(&state, &expected, 1)) {
    memcpy(shared, local, sizeof shared);
    atomic_store_explicit(&state, 2, memory_order_release);
  }
  return update((const uint32_t(*)[256])local, crc, data, n);
}
