/* frontends/gguf/gguf_quant.c: the GGML type table of base/quant.h (RX_GGUF_TYPES) and the
 * reference dequantization of each block format relaxc reads, written from the format's definition
 * (ggml-common.h's block structs and the semantics of ggml's dequantize_row_*; gguf-py's quants.py
 * computes the same in NumPy). Every product of two scales is rounded to f32 on its own statement
 * before it meets a quant, and a product is never fused with the add or subtract that follows (ISO
 * C's default FP_CONTRACT lets a compiler fuse within one expression only), so the results equal
 * the NumPy reference bit for bit. Blocks are read byte by byte, little-endian: they need no
 * alignment. */
#include "gguf.h"

#include <string.h>

static float bits_f32(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}

/* The f16 at p (two bytes, little-endian) as a float: base.h's exact conversion. */
static float half(const uint8_t *p) { return base_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void rx_gguf_deq_f32(const uint8_t *b, float *y) {
  *y = bits_f32((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

static void rx_gguf_deq_f16(const uint8_t *b, float *y) { *y = half(b); }

static void rx_gguf_deq_bf16(const uint8_t *b, float *y) {
  *y = bits_f32(((uint32_t)b[0] | (uint32_t)b[1] << 8) << 16);
}

/* block_q8_0: f16 d, int8 qs[32]; y = qs * d. */
static void rx_gguf_deq_q8_0(const uint8_t *b, float *y) {
  float d = half(b);
  for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* block_q4_0: f16 d, qs[16]; element j < 16 is the low nibble of qs[j], element j + 16 its high
 * nibble, each minus 8, times d. */
static void rx_gguf_deq_q4_0(const uint8_t *b, float *y) {
  float d = half(b);
  for (int j = 0; j < 16; j++) {
    y[j] = (float)((b[2 + j] & 15) - 8) * d;
    y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
  }
}

/* block_q4_1: f16 d, f16 m, qs[16]; as Q4_0 without the offset of 8, y = q * d + m. */
static void rx_gguf_deq_q4_1(const uint8_t *b, float *y) {
  float d = half(b), m = half(b + 2);
  for (int j = 0; j < 16; j++) {
    float lo = (float)(b[4 + j] & 15) * d, hi = (float)(b[4 + j] >> 4) * d;
    y[j] = lo + m;
    y[j + 16] = hi + m;
  }
}

/* block_q5_0: f16 d, u32 qh (bit j: the fifth bit of element j), qs[16] as Q4_0; q - 16, times d.
 */
static void rx_gguf_deq_q5_0(const uint8_t *b, float *y) {
  float d = half(b);
  uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
  for (int j = 0; j < 16; j++) {
    int lo = (int)((b[6 + j] & 15) | ((qh >> j) & 1) << 4);
    int hi = (int)((b[6 + j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
    y[j] = (float)(lo - 16) * d;
    y[j + 16] = (float)(hi - 16) * d;
  }
}

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block from its 12 bytes q:
 * bytes 0-3 hold the scales of 0-3 (low 6 bits) and the top 2 bits of the scales of 4-7, bytes
 * 4-7 the same for the mins, bytes 8-11 the low 4 bits of the scales (low nibble) and mins (high
 * nibble) of 4-7 (ggml's get_scale_min_k4). */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 15) | (q[j - 4] >> 6) << 4;
    *m = (q[j + 4] >> 4) | (q[j] >> 6) << 4;
  }
}

/* block_q4_K and block_q5_K: f16 d, f16 dmin, scales[12], (Q5_K: qh[32]), qs[128]: eight
 * sub-blocks of 32; sub-block j takes the low (j even) or high (j odd) nibbles of qs[32 * (j / 2)
 * ...], Q5_K adds bit j of qh[l] as the fifth bit of its element l; y = (d * scale) * q -
 * (dmin * min). */
static void deq_k4(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y) {
  float d = half(b), dmin = half(b + 2);
  for (int j = 0; j < 8; j++) {
    int sc, m;
    scale_min_k4(j, b + 4, &sc, &m);
    float d1 = d * (float)sc, m1 = dmin * (float)m;
    for (int l = 0; l < 32; l++) {
      int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
      if (qh) q |= ((qh[l] >> j) & 1) << 4;
      float p = d1 * (float)q;
      y[32 * j + l] = p - m1;
    }
  }
}

static void rx_gguf_deq_q4_k(const uint8_t *b, float *y) { deq_k4(b, NULL, b + 16, y); }

static void rx_gguf_deq_q5_k(const uint8_t *b, float *y) { deq_k4(b, b + 16, b + 48, y); }

/* block_q6_K: ql[128], qh[64], int8 scales[16], f16 d. Each half of 128 elements takes 64 bytes
 * of ql and 32 of qh: element l + 32 * s (l < 32, s < 4) of the half has the low (s < 2) or high
 * nibble of ql[l + 32 * (s % 2)] and bits 2s, 2s+1 of qh[l] above it; minus 32, times d times the
 * scale of its 16 elements. */
static void rx_gguf_deq_q6_k(const uint8_t *b, float *y) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  float d = half(b + 208);
  for (int h = 0; h < 2; h++, ql += 64, qh += 32, y += 128, sc += 8)
    for (int s = 0; s < 4; s++)
      for (int l = 0; l < 32; l++) {
        int lo = (ql[l + 32 * (s % 2)] >> (4 * (s / 2))) & 15;
        int q = (lo | ((qh[l] >> (2 * s)) & 3) << 4) - 32;
        float ds = d * (float)sc[(32 * s + l) / 16];
        y[32 * s + l] = ds * (float)q;
      }
}

typedef void (*deq_fn)(const uint8_t *block, float *out);

static const struct {
  const char *name;
  int block, bytes;
  deq_fn deq;
} types[] = {
#define X(N, num, block, bytes, deq) [num] = {#N, block, bytes, deq},
    RX_GGUF_TYPES(X)
#undef X
};

static const char *const vtypes[] = {
#define X(N, num, name, size) [num] = name,
    RX_GGUF_VTYPES(X)
#undef X
};

const char *gguf_vtype_name(uint32_t t) { return t < RX_ARRAY_LEN(vtypes) ? vtypes[t] : NULL; }

const char *gguf_type_name(uint32_t t) { return t < RX_ARRAY_LEN(types) ? types[t].name : NULL; }

bool gguf_type_supported(uint32_t t) { return t < RX_ARRAY_LEN(types) && types[t].deq; }

int gguf_block_elems(rx_gguf_type t) { return gguf_type_supported(t) ? types[t].block : 0; }

int gguf_block_bytes(rx_gguf_type t) { return gguf_type_supported(t) ? types[t].bytes : 0; }

void gguf_supported_list(rx_strbuf *out) {
  for (size_t t = 0, k = 0; t < RX_ARRAY_LEN(types); t++)
    if (types[t].deq) base_strbuf_printf(out, "%s%s", k++ ? ", " : "", types[t].name);
}

void gguf_dequantize(rx_gguf_type t, const void *src, int64_t n, float *out) {
  RX_ASSERT(gguf_type_supported(t) && n >= 0 && n % types[t].block == 0);
  const uint8_t *b = src;
  for (int64_t i = 0; i < n / types[t].block; i++)
    types[t].deq(b + i * types[t].bytes, out + i * types[t].block);
}
