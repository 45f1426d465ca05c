/* utvm runtime, src/kernels/signal/fft_f32.h: KISS FFT's scalar arithmetic in float, as TFLM builds it
   (_kiss_fft_guts.h without FIXED_POINT). The operations, KISS FFT's macros: fd = C_FIXDIV (nothing in float),
   ad / sb = C_ADD / C_SUB, ng = negation, hf = HALF_OF of a sum, cm = C_MUL, sm = S_MUL, hv = HALF_OF;
   cfft.h, rfft.h and irfft.h use them. Copied verbatim into generated sources by the code generator (README.md). */

static inline float signal_fd_f32(float v, float k) {
  (void)k;
  return v;
}
static inline float signal_ad_f32(float a, float b) {
  return a + b;
}
static inline float signal_sb_f32(float a, float b) {
  return a - b;
}
static inline float signal_ng_f32(float a) {
  return -a;
}
static inline float signal_hf_f32(float s) {
  return s * 0.5f;
}
static inline void signal_cm_f32(float* mr, float* mi, float ar, float ai, float br, float bi) {
  *mr = ar * br - ai * bi;
  *mi = ar * bi + ai * br;
}
static inline float signal_sm_f32(float a, float b) {
  return a * b;
}
static inline float signal_hv_f32(float a) {
  return a * 0.5f;
}
