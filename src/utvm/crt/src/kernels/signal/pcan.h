/* utvm runtime, src/kernels/signal/pcan.h: TFLM's PCAN gain control (signal/src/pcan_argc_fixed.cc).
   Copied verbatim into generated sources by the code generator (README.md). Needs <stdint.h> and msb32.h. */

/* TFLM's PCAN: the gain lookup (piecewise quadratic in msb(x)) and the shrink function (12 -> 6 bits). */
static inline int16_t signal_wdf(uint32_t x, const int16_t* lut) {
  int32_t interval;
  int32_t frac;
  int32_t result;
  if (x <= 2u) {
    return lut[x];
  }
  interval = (int32_t)signal_msb32(x);
  lut += 4 * interval - 6;
  frac = (int32_t)(((interval < 11) ? (x << (11 - interval)) : (x >> (interval - 11))) & 0x3FFu);
  result = ((int32_t)lut[2] * frac) >> 5;
  result = (int32_t)((uint32_t)result + ((uint32_t)(int32_t)lut[1] << 5));
  result = (int32_t)((uint32_t)result * (uint32_t)frac);
  result = (int32_t)((uint32_t)result + (1u << 14)) >> 15;
  result += lut[0];
  return (int16_t)result;
}
static inline uint32_t signal_pcan_shrink(uint32_t x) {
  if (x < (2u << 12)) {
    return (x * x) >> 20;
  }
  return (x >> 6) - (1u << 6);
}
