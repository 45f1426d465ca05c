/* utvm runtime, src/kernels/signal/sqrt.h: TFLM's integer square roots (signal/src/square_root_32.cc and
   square_root_64.cc). Copied verbatim into generated sources by the code generator (README.md).
   Needs <stdint.h> and msb32.h. */

/* TFLM's Sqrt32 / Sqrt64: bitwise integer square root, rounded up when the remainder exceeds the root. */
static inline uint32_t signal_sqrt32(uint32_t num) {
  uint32_t res = 0u;
  int32_t mbn;
  uint32_t bit;
  int32_t it;
  if (num == 0u) {
    return 0u;
  }
  mbn = (int32_t)(32u - signal_msb32(num)) | 1;
  bit = (uint32_t)1 << (31 - mbn);
  for (it = (31 - mbn) / 2 + 1; it > 0; --it) {
    if (num >= res + bit) {
      num -= res + bit;
      res = (res >> 1) + bit;
    } else {
      res >>= 1;
    }
    bit >>= 2;
  }
  if (num > res && res != 0xFFFFu) {
    ++res;
  }
  return res & 0xFFFFu;
}
static inline uint32_t signal_sqrt64(uint64_t num) {
  uint64_t res = 0u;
  int32_t mbn;
  uint64_t bit;
  int32_t it;
  if ((num >> 32) == 0u) {
    return signal_sqrt32((uint32_t)num);
  }
  /* 64 - MostSignificantBit64(num), the upper word being non-zero */
  mbn = (int32_t)(32u - signal_msb32((uint32_t)(num >> 32))) | 1;
  bit = (uint64_t)1 << (63 - mbn);
  for (it = (63 - mbn) / 2 + 1; it > 0; --it) {
    if (num >= res + bit) {
      num -= res + bit;
      res = (res >> 1) + bit;
    } else {
      res >>= 1;
    }
    bit >>= 2;
  }
  if (num > res && res != 0xFFFFFFFFu) {
    ++res;
  }
  return (uint32_t)res;
}
