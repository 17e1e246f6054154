/* frontends/hf/quantize.c: round-to-nearest quantization of a weight into one of relaxc's own
 * schemes (base/quant.h), the bytes `quant_matmul` reads (ops/quant.c). Per group of G weights of
 * a row, with the f16 scale rounded first and every quant computed from that rounded scale (so
 * the dequantized weight is the nearest the stored scale can give):
 *
 *   q4f16_gG   s = max|w| / 7,          q = clamp(round(w / s), -8, 7) + 8 (stored 0..15)
 *   q4f16a_gG  lo = min(min w, 0), hi = max(max w, 0) (the range holds 0: z is a level),
 *              s = (hi - lo) / 15, z = clamp(round(-lo / s), 0, 15),
 *              q = clamp(round(w / s) + z, 0, 15)
 *   q8f16_gG   s = max|w| / 127,        q = clamp(round(w / s), -127, 127)
 *
 * A group of zeros gets s = 0 (and q = 8, z = 0, q = 0): it dequantizes to zeros. round() is
 * round-half-away-from-zero, as C's roundf. */
#include "hf.h"

#include <math.h>

static int clampi(long v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

rx_status hf_quantize(rx_quant_scheme sc, const float *w, int64_t rows, int64_t in, uint8_t *out_w,
                      uint16_t *out_s, uint8_t *out_z) {
  const rx_quant_info *qi = base_quant_info_of(sc);
  int G = qi->block;
  if (qi->kind == RX_QUANT_GGUF)
    return base_status_make(RX_ERR_UNSUPPORTED,
                            "quantizing into %s: GGUF's block formats are read from GGUF files, "
                            "relaxc quantizes into q4f16_g*, q4f16a_g* and q8f16*",
                            qi->name);
  if (rows < 0 || in <= 0 || in % G != 0)
    return base_status_make(
        RX_ERR_INVALID,
        "quantizing a [%lld, %lld] weight into %s: the input dimension must be a "
        "positive multiple of %d",
        (long long)rows, (long long)in, qi->name, G);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t g = 0; g < in / G; g++) {
      const float *x = w + r * in + g * G;
      float lo = 0, hi = 0, amax = 0;
      for (int i = 0; i < G; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
      }
      float span = qi->kind == RX_QUANT_INT4_ZERO ? (hi - lo) / 15.0f
                   : qi->kind == RX_QUANT_INT4    ? amax / 7.0f
                                                  : amax / 127.0f;
      uint16_t sh = base_f32_to_f16(span);
      float s = base_f16_to_f32(sh);
      int zero = qi->kind == RX_QUANT_INT4_ZERO && s > 0 ? clampi(lroundf(-lo / s), 0, 15) : 0;
      out_s[r * (in / G) + g] = sh;
      if (out_z && qi->kind == RX_QUANT_INT4_ZERO) out_z[r * (in / G) + g] = (uint8_t)zero;
      for (int i = 0; i < G; i++) {
        long q = s > 0 ? lroundf(x[i] / s) : 0;
        int64_t k = g * G + i;
        if (qi->kind == RX_QUANT_INT8) {
          ((int8_t *)out_w)[r * in + k] = (int8_t)clampi(q, -127, 127);
          continue;
        }
        int v = qi->kind == RX_QUANT_INT4 ? clampi(q, -8, 7) + 8 : clampi(q + zero, 0, 15);
        uint8_t *b = &out_w[r * (in / 2) + k / 2];
        *b = k % 2 ? (uint8_t)((*b & 15) | v << 4) : (uint8_t)((*b & 0xf0) | v);
      }
    }
  return NULL;
}
