/* utvm runtime, src/kernels/signal/msb32.h: TFLM's MostSignificantBit32 (signal/src/msb.h).
   Copied verbatim into generated sources by the code generator (README.md). Needs <stdint.h>. */

/* MostSignificantBit32 as TFLM builds it: the bit length, and 32 for 0. */
static inline uint32_t signal_msb32(uint32_t x) {
  uint32_t n = 0;
  if (x == 0u) {
    return 32u;
  }
  while (x != 0u) {
    x >>= 1;
    ++n;
  }
  return n;
}
