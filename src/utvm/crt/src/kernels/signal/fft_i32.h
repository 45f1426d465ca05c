/* utvm runtime, src/kernels/signal/fft_i32.h: KISS FFT's scalar arithmetic in Q31 (int32_t values, int64_t
   products and sums), as TFLM builds it (FIXED_POINT 32, _kiss_fft_guts.h). The operations, KISS FFT's macros:
   sr = the rounding shift of a product, fd = C_FIXDIV (times 1 / k), ad / sb = C_ADD / C_SUB, ng = negation,
   hf = HALF_OF of a sum, cm = C_MUL, sm = S_MUL, hv = HALF_OF; cfft.h, rfft.h and irfft.h use them.
   Copied verbatim into generated sources by the code generator (README.md). Needs <stdint.h>. */

static inline int32_t signal_sr_i32(int64_t v) {
  return (int32_t)((v + ((int64_t)1 << 30)) >> 31);
}
static inline int32_t signal_fd_i32(int32_t v, int64_t k) {
  return signal_sr_i32((int64_t)v * (int64_t)(2147483647 / k));
}
static inline int32_t signal_ad_i32(int32_t a, int32_t b) {
  return (int32_t)((int64_t)a + (int64_t)b);
}
static inline int32_t signal_sb_i32(int32_t a, int32_t b) {
  return (int32_t)((int64_t)a - (int64_t)b);
}
static inline int32_t signal_ng_i32(int32_t a) {
  return (int32_t)(-(int64_t)a);
}
/* HALF_OF(a + b) given the sum in W: int16 halves the exact int sum; int32 the wrapped int32 sum. */
static inline int32_t signal_hf_i32(int64_t s) {
  return ((int32_t)(((int32_t)s) >> 1));
}
static inline void signal_cm_i32(int32_t* mr, int32_t* mi, int32_t ar, int32_t ai, int32_t br, int32_t bi) {
  *mr = signal_sr_i32((int64_t)ar * br - (int64_t)ai * bi);
  *mi = signal_sr_i32((int64_t)ar * bi + (int64_t)ai * br);
}
static inline int32_t signal_sm_i32(int32_t a, int32_t b) {
  return signal_sr_i32((int64_t)a * b);
}
static inline int64_t signal_hv_i32(int32_t a) {
  return (int64_t)a >> 1;
}
