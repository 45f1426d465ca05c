/* utvm runtime, src/kernels/signal/fft_i16.h: KISS FFT's scalar arithmetic in Q15 (int16_t values, int32_t
   products and sums), as TFLM builds it (FIXED_POINT 16, _kiss_fft_guts.h). The operations, KISS FFT's macros:
   sr = the rounding shift of a product, fd = C_FIXDIV (times 1 / k), ad / sb = C_ADD / C_SUB, ng = negation,
   hf = HALF_OF of a sum, cm = C_MUL, sm = S_MUL, hv = HALF_OF; cfft.h, rfft.h and irfft.h use them.
   Copied verbatim into generated sources by the code generator (README.md). Needs <stdint.h>. */

static inline int16_t signal_sr_i16(int32_t v) {
  return (int16_t)((v + ((int32_t)1 << 14)) >> 15);
}
static inline int16_t signal_fd_i16(int16_t v, int32_t k) {
  return signal_sr_i16((int32_t)v * (int32_t)(32767 / k));
}
static inline int16_t signal_ad_i16(int16_t a, int16_t b) {
  return (int16_t)((int32_t)a + (int32_t)b);
}
static inline int16_t signal_sb_i16(int16_t a, int16_t b) {
  return (int16_t)((int32_t)a - (int32_t)b);
}
static inline int16_t signal_ng_i16(int16_t a) {
  return (int16_t)(-(int32_t)a);
}
/* HALF_OF(a + b) given the sum in W: int16 halves the exact int sum; int32 the wrapped int32 sum. */
static inline int16_t signal_hf_i16(int32_t s) {
  return ((int16_t)(s >> 1));
}
static inline void signal_cm_i16(int16_t* mr, int16_t* mi, int16_t ar, int16_t ai, int16_t br, int16_t bi) {
  *mr = signal_sr_i16((int32_t)ar * br - (int32_t)ai * bi);
  *mi = signal_sr_i16((int32_t)ar * bi + (int32_t)ai * br);
}
static inline int16_t signal_sm_i16(int16_t a, int16_t b) {
  return signal_sr_i16((int32_t)a * b);
}
static inline int32_t signal_hv_i16(int16_t a) {
  return (int32_t)a >> 1;
}
