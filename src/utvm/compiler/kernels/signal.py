"""C kernels of the signal op family (utvm.ops.signal): TFLite Micro's signal library, bit-exact.

Integer arithmetic follows TFLM's signal/src code: stores into int16/int32 wrap (computed in a wider type
and converted, which every compiler we target defines as wrapping), uint32/uint64 arithmetic is modular.
The FFTs are KISS FFT's fixed-point (int16, int32) or float real transforms (radices 2, 3, 4, 5):
the leaf permutation of its decimation-in-time recursion, the twiddles (computed at compile time exactly
as KISS FFT computes them at init, in double) and the stage list are tables; the butterflies are shared
helpers, one set per element type.
"""

from __future__ import annotations

import math

from utvm.compiler.kernels import KernelCode, KernelContext, define_helper, register
from utvm.ops.signal import (
    LOG_LUT,
    SignalParams,
    fft_factors,
    fft_leaf_order,
    fft_super_twiddles,
    fft_twiddles,
)

define_helper("signal_msb32", """\
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
}""", "signal_msb32")

define_helper("signal_sqrt64", """\
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
  uint64_t t = num;
  int32_t n = 0;
  int32_t mbn;
  uint64_t bit;
  int32_t it;
  if ((num >> 32) == 0u) {
    return signal_sqrt32((uint32_t)num);
  }
  while (t != 0u) {
    t >>= 1;
    ++n;
  }
  mbn = (64 - n) | 1;
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
}""", "signal_sqrt64", deps=("signal_msb32",))

_LUT_TEXT = ", ".join(str(v) for v in LOG_LUT)
define_helper("signal_log32", f"""\
static const uint16_t signal_log_lut[{len(LOG_LUT)}] = {{{_LUT_TEXT}}};
/* TFLM's Log32: log2 by table interpolation, times ln 2 (Q16), times out_scale (Q16), uint32 arithmetic. */
static inline uint32_t signal_log32(uint32_t x, uint32_t out_scale) {{
  const uint32_t integer = signal_msb32(x) - 1u;
  int32_t frac = (int32_t)(x - ((uint32_t)1 << integer));
  uint32_t base_seg;
  int32_t c0;
  int32_t c1;
  int32_t rel_pos;
  uint32_t log2v;
  uint32_t loge;
  if (integer < 16u) {{
    frac = (int32_t)((uint32_t)frac << (16u - integer));
  }} else {{
    frac >>= (integer - 16u);
  }}
  base_seg = (uint32_t)frac >> 9;
  c0 = (int32_t)signal_log_lut[base_seg];
  c1 = (int32_t)signal_log_lut[base_seg + 1u];
  rel_pos = ((c1 - c0) * (frac - (int32_t)(512u * base_seg))) >> 16;
  log2v = (integer << 16) + (uint32_t)(frac + c0 + rel_pos);
  loge = (uint32_t)(((uint64_t)45426u * log2v + 32768u) >> 16);
  return (out_scale * loge + 32768u) >> 16;
}}""", "signal_log32", deps=("signal_msb32",))

define_helper("signal_pcan", """\
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
}""", "signal_wdf", deps=("signal_msb32",))

# KISS FFT per element type: T, the product type W, and the primitive operations.
_FFT_TYPES = {
    "int16": dict(s="i16", T="int16_t", W="int32_t", fixed=True, frac=15, smax=32767),
    "int32": dict(s="i32", T="int32_t", W="int64_t", fixed=True, frac=31, smax=2147483647),
    "float32": dict(s="f32", T="float", W="float", fixed=False, frac=0, smax=0),
}


def _fft_helper(dtype: str) -> str:
    d = _FFT_TYPES[dtype]
    s, T, W = d["s"], d["T"], d["W"]
    if d["fixed"]:
        half = f"(({T})(s >> 1))" if dtype == "int16" else f"(({T})((({T})s) >> 1))"
        prims = f"""\
static inline {T} signal_sr_{s}({W} v) {{
  return ({T})((v + (({W})1 << {d["frac"] - 1})) >> {d["frac"]});
}}
static inline {T} signal_fd_{s}({T} v, {W} k) {{
  return signal_sr_{s}(({W})v * ({W})({d["smax"]} / k));
}}
static inline {T} signal_ad_{s}({T} a, {T} b) {{
  return ({T})(({W})a + ({W})b);
}}
static inline {T} signal_sb_{s}({T} a, {T} b) {{
  return ({T})(({W})a - ({W})b);
}}
static inline {T} signal_ng_{s}({T} a) {{
  return ({T})(-({W})a);
}}
/* HALF_OF(a + b) given the sum in W: int16 halves the exact int sum; int32 the wrapped int32 sum. */
static inline {T} signal_hf_{s}({W} s) {{
  return {half};
}}
static inline void signal_cm_{s}({T}* mr, {T}* mi, {T} ar, {T} ai, {T} br, {T} bi) {{
  *mr = signal_sr_{s}(({W})ar * br - ({W})ai * bi);
  *mi = signal_sr_{s}(({W})ar * bi + ({W})ai * br);
}}
static inline {T} signal_sm_{s}({T} a, {T} b) {{
  return signal_sr_{s}(({W})a * b);
}}
static inline {W} signal_hv_{s}({T} a) {{
  return ({W})a >> 1;
}}"""
    else:
        prims = f"""\
static inline {T} signal_fd_{s}({T} v, {W} k) {{
  (void)k;
  return v;
}}
static inline {T} signal_ad_{s}({T} a, {T} b) {{
  return a + b;
}}
static inline {T} signal_sb_{s}({T} a, {T} b) {{
  return a - b;
}}
static inline {T} signal_ng_{s}({T} a) {{
  return -a;
}}
static inline {T} signal_hf_{s}({W} s) {{
  return s * 0.5f;
}}
static inline void signal_cm_{s}({T}* mr, {T}* mi, {T} ar, {T} ai, {T} br, {T} bi) {{
  *mr = ar * br - ai * bi;
  *mi = ar * bi + ai * br;
}}
static inline {T} signal_sm_{s}({T} a, {T} b) {{
  return a * b;
}}
static inline {W} signal_hv_{s}({T} a) {{
  return a * 0.5f;
}}"""
    return prims + f"""
/* KISS FFT of n complex values (interleaved re, im): the leaves in recursion order, then the radix 2, 3, 4
   and 5 stages innermost first (stages[2k] = radix, stages[2k + 1] = sub-length). Sums of more than two
   terms are formed in W and stored once (the same bits as TFLM's wrapping int arithmetic). */
static void signal_cfft_{s}({T}* out, const {T}* in, int32_t n, const int32_t* order, const int32_t* stages,
                           int32_t nstages, const {T}* tw, int32_t inverse) {{
  int32_t k;
  int32_t st;
  for (k = 0; k < n; ++k) {{
    out[2 * k] = in[2 * order[k]];
    out[2 * k + 1] = in[2 * order[k] + 1];
  }}
  for (st = nstages - 1; st >= 0; --st) {{
    const int32_t p = stages[2 * st];
    const int32_t m = stages[2 * st + 1];
    const int32_t fstride = n / (p * m);
    int32_t base;
    for (base = 0; base < n; base += p * m) {{
      {T}* f = out + 2 * base;
      int32_t u;
      for (u = 0; u < m; ++u) {{
        {T}* f0 = f + 2 * u;
        if (p == 2) {{
          {T}* f1 = f0 + 2 * m;
          {T} tr;
          {T} ti;
          const {T} ar = signal_fd_{s}(f0[0], 2);
          const {T} ai = signal_fd_{s}(f0[1], 2);
          const {T} br = signal_fd_{s}(f1[0], 2);
          const {T} bi = signal_fd_{s}(f1[1], 2);
          signal_cm_{s}(&tr, &ti, br, bi, tw[2 * u * fstride], tw[2 * u * fstride + 1]);
          f1[0] = signal_sb_{s}(ar, tr);
          f1[1] = signal_sb_{s}(ai, ti);
          f0[0] = signal_ad_{s}(ar, tr);
          f0[1] = signal_ad_{s}(ai, ti);
        }} else if (p == 3) {{
          {T}* f1 = f0 + 2 * m;
          {T}* f2 = f0 + 4 * m;
          const {T} e3i = tw[2 * fstride * m + 1];
          {T} s0r, s0i, s1r, s1i, s2r, s2i, s3r, s3i, g1r, g1i;
          const {T} x0r = signal_fd_{s}(f0[0], 3);
          const {T} x0i = signal_fd_{s}(f0[1], 3);
          const {T} x1r = signal_fd_{s}(f1[0], 3);
          const {T} x1i = signal_fd_{s}(f1[1], 3);
          const {T} x2r = signal_fd_{s}(f2[0], 3);
          const {T} x2i = signal_fd_{s}(f2[1], 3);
          signal_cm_{s}(&s1r, &s1i, x1r, x1i, tw[2 * u * fstride], tw[2 * u * fstride + 1]);
          signal_cm_{s}(&s2r, &s2i, x2r, x2i, tw[4 * u * fstride], tw[4 * u * fstride + 1]);
          s3r = signal_ad_{s}(s1r, s2r);
          s3i = signal_ad_{s}(s1i, s2i);
          s0r = signal_sb_{s}(s1r, s2r);
          s0i = signal_sb_{s}(s1i, s2i);
          g1r = ({T})(({W})x0r - signal_hv_{s}(s3r));
          g1i = ({T})(({W})x0i - signal_hv_{s}(s3i));
          s0r = signal_sm_{s}(s0r, e3i);
          s0i = signal_sm_{s}(s0i, e3i);
          f0[0] = signal_ad_{s}(x0r, s3r);
          f0[1] = signal_ad_{s}(x0i, s3i);
          f2[0] = signal_ad_{s}(g1r, s0i);
          f2[1] = signal_sb_{s}(g1i, s0r);
          f1[0] = signal_sb_{s}(g1r, s0i);
          f1[1] = signal_ad_{s}(g1i, s0r);
        }} else if (p == 5) {{
          {T}* f1 = f0 + 2 * m;
          {T}* f2 = f0 + 4 * m;
          {T}* f3 = f0 + 6 * m;
          {T}* f4 = f0 + 8 * m;
          const {T} yar = tw[2 * fstride * m];
          const {T} yai = tw[2 * fstride * m + 1];
          const {T} ybr = tw[4 * fstride * m];
          const {T} ybi = tw[4 * fstride * m + 1];
          {T} s1r, s1i, s2r, s2i, s3r, s3i, s4r, s4i, s5r, s5i, s6r, s6i;
          {T} s7r, s7i, s8r, s8i, s9r, s9i, s10r, s10i, s11r, s11i, s12r, s12i;
          const {T} x0r = signal_fd_{s}(f0[0], 5);
          const {T} x0i = signal_fd_{s}(f0[1], 5);
          const {T} x1r = signal_fd_{s}(f1[0], 5);
          const {T} x1i = signal_fd_{s}(f1[1], 5);
          const {T} x2r = signal_fd_{s}(f2[0], 5);
          const {T} x2i = signal_fd_{s}(f2[1], 5);
          const {T} x3r = signal_fd_{s}(f3[0], 5);
          const {T} x3i = signal_fd_{s}(f3[1], 5);
          const {T} x4r = signal_fd_{s}(f4[0], 5);
          const {T} x4i = signal_fd_{s}(f4[1], 5);
          signal_cm_{s}(&s1r, &s1i, x1r, x1i, tw[2 * u * fstride], tw[2 * u * fstride + 1]);
          signal_cm_{s}(&s2r, &s2i, x2r, x2i, tw[4 * u * fstride], tw[4 * u * fstride + 1]);
          signal_cm_{s}(&s3r, &s3i, x3r, x3i, tw[6 * u * fstride], tw[6 * u * fstride + 1]);
          signal_cm_{s}(&s4r, &s4i, x4r, x4i, tw[8 * u * fstride], tw[8 * u * fstride + 1]);
          s7r = signal_ad_{s}(s1r, s4r);
          s7i = signal_ad_{s}(s1i, s4i);
          s10r = signal_sb_{s}(s1r, s4r);
          s10i = signal_sb_{s}(s1i, s4i);
          s8r = signal_ad_{s}(s2r, s3r);
          s8i = signal_ad_{s}(s2i, s3i);
          s9r = signal_sb_{s}(s2r, s3r);
          s9i = signal_sb_{s}(s2i, s3i);
          f0[0] = ({T})(({W})x0r + ({W})s7r + ({W})s8r);
          f0[1] = ({T})(({W})x0i + ({W})s7i + ({W})s8i);
          s5r = ({T})(({W})x0r + ({W})signal_sm_{s}(s7r, yar) + ({W})signal_sm_{s}(s8r, ybr));
          s5i = ({T})(({W})x0i + ({W})signal_sm_{s}(s7i, yar) + ({W})signal_sm_{s}(s8i, ybr));
          s6r = ({T})(({W})signal_sm_{s}(s10i, yai) + ({W})signal_sm_{s}(s9i, ybi));
          s6i = ({T})(-({W})signal_sm_{s}(s10r, yai) - ({W})signal_sm_{s}(s9r, ybi));
          f1[0] = signal_sb_{s}(s5r, s6r);
          f1[1] = signal_sb_{s}(s5i, s6i);
          f4[0] = signal_ad_{s}(s5r, s6r);
          f4[1] = signal_ad_{s}(s5i, s6i);
          s11r = ({T})(({W})x0r + ({W})signal_sm_{s}(s7r, ybr) + ({W})signal_sm_{s}(s8r, yar));
          s11i = ({T})(({W})x0i + ({W})signal_sm_{s}(s7i, ybr) + ({W})signal_sm_{s}(s8i, yar));
          s12r = ({T})(-({W})signal_sm_{s}(s10i, ybi) + ({W})signal_sm_{s}(s9i, yai));
          s12i = ({T})(({W})signal_sm_{s}(s10r, ybi) - ({W})signal_sm_{s}(s9r, yai));
          f2[0] = signal_ad_{s}(s11r, s12r);
          f2[1] = signal_ad_{s}(s11i, s12i);
          f3[0] = signal_sb_{s}(s11r, s12r);
          f3[1] = signal_sb_{s}(s11i, s12i);
        }} else {{
          {T}* f1 = f0 + 2 * m;
          {T}* f2 = f0 + 4 * m;
          {T}* f3 = f0 + 6 * m;
          {T} s0r, s0i, s1r, s1i, s2r, s2i, s3r, s3i, s4r, s4i, s5r, s5i, a0r, a0i;
          const {T} x0r = signal_fd_{s}(f0[0], 4);
          const {T} x0i = signal_fd_{s}(f0[1], 4);
          const {T} x1r = signal_fd_{s}(f1[0], 4);
          const {T} x1i = signal_fd_{s}(f1[1], 4);
          const {T} x2r = signal_fd_{s}(f2[0], 4);
          const {T} x2i = signal_fd_{s}(f2[1], 4);
          const {T} x3r = signal_fd_{s}(f3[0], 4);
          const {T} x3i = signal_fd_{s}(f3[1], 4);
          signal_cm_{s}(&s0r, &s0i, x1r, x1i, tw[2 * u * fstride], tw[2 * u * fstride + 1]);
          signal_cm_{s}(&s1r, &s1i, x2r, x2i, tw[4 * u * fstride], tw[4 * u * fstride + 1]);
          signal_cm_{s}(&s2r, &s2i, x3r, x3i, tw[6 * u * fstride], tw[6 * u * fstride + 1]);
          s5r = signal_sb_{s}(x0r, s1r);
          s5i = signal_sb_{s}(x0i, s1i);
          a0r = signal_ad_{s}(x0r, s1r);
          a0i = signal_ad_{s}(x0i, s1i);
          s3r = signal_ad_{s}(s0r, s2r);
          s3i = signal_ad_{s}(s0i, s2i);
          s4r = signal_sb_{s}(s0r, s2r);
          s4i = signal_sb_{s}(s0i, s2i);
          f2[0] = signal_sb_{s}(a0r, s3r);
          f2[1] = signal_sb_{s}(a0i, s3i);
          f0[0] = signal_ad_{s}(a0r, s3r);
          f0[1] = signal_ad_{s}(a0i, s3i);
          if (inverse) {{
            f1[0] = signal_sb_{s}(s5r, s4i);
            f1[1] = signal_ad_{s}(s5i, s4r);
            f3[0] = signal_ad_{s}(s5r, s4i);
            f3[1] = signal_sb_{s}(s5i, s4r);
          }} else {{
            f1[0] = signal_ad_{s}(s5r, s4i);
            f1[1] = signal_sb_{s}(s5i, s4r);
            f3[0] = signal_sb_{s}(s5r, s4i);
            f3[1] = signal_ad_{s}(s5i, s4r);
          }}
        }}
      }}
    }}
  }}
}}
@@SPLIT@@/* kiss_fftr: the real FFT of nfft = 2 * ncfft samples in `x` (already padded) into ncfft + 1 bins. */
static void signal_rfft_{s}(const {T}* x, {T}* y, {T}* tmp, int32_t ncfft, const int32_t* order,
                           const int32_t* stages, int32_t nstages, const {T}* tw, const {T}* stw) {{
  int32_t k;
  {T} dr;
  {T} di;
  signal_cfft_{s}(tmp, x, ncfft, order, stages, nstages, tw, 0);
  dr = signal_fd_{s}(tmp[0], 2);
  di = signal_fd_{s}(tmp[1], 2);
  y[0] = signal_ad_{s}(dr, di);
  y[2 * ncfft] = signal_sb_{s}(dr, di);
  y[1] = 0;
  y[2 * ncfft + 1] = 0;
  for (k = 1; k <= ncfft / 2; ++k) {{
    const {T} pkr = signal_fd_{s}(tmp[2 * k], 2);
    const {T} pki = signal_fd_{s}(tmp[2 * k + 1], 2);
    const {T} pnr = signal_fd_{s}(tmp[2 * (ncfft - k)], 2);
    const {T} pni = signal_fd_{s}(signal_ng_{s}(tmp[2 * (ncfft - k) + 1]), 2);
    const {T} f1r = signal_ad_{s}(pkr, pnr);
    const {T} f1i = signal_ad_{s}(pki, pni);
    const {T} f2r = signal_sb_{s}(pkr, pnr);
    const {T} f2i = signal_sb_{s}(pki, pni);
    {T} twr;
    {T} twi;
    signal_cm_{s}(&twr, &twi, f2r, f2i, stw[2 * (k - 1)], stw[2 * (k - 1) + 1]);
    y[2 * k] = signal_hf_{s}(({W})f1r + ({W})twr);
    y[2 * k + 1] = signal_hf_{s}(({W})f1i + ({W})twi);
    y[2 * (ncfft - k)] = signal_hf_{s}(({W})f1r - ({W})twr);
    y[2 * (ncfft - k) + 1] = signal_hf_{s}(({W})twi - ({W})f1i);
  }}
}}
@@SPLIT@@/* kiss_fftri: ncfft + 1 bins in `x` into nfft = 2 * ncfft samples in `y` (unscaled). */
static void signal_irfft_{s}(const {T}* x, {T}* y, {T}* tmp, int32_t ncfft, const int32_t* order,
                            const int32_t* stages, int32_t nstages, const {T}* tw, const {T}* stw) {{
  int32_t k;
  tmp[0] = signal_fd_{s}(signal_ad_{s}(x[0], x[2 * ncfft]), 2);
  tmp[1] = signal_fd_{s}(signal_sb_{s}(x[0], x[2 * ncfft]), 2);
  for (k = 1; k <= ncfft / 2; ++k) {{
    const {T} fkr = signal_fd_{s}(x[2 * k], 2);
    const {T} fki = signal_fd_{s}(x[2 * k + 1], 2);
    const {T} fnr = signal_fd_{s}(x[2 * (ncfft - k)], 2);
    const {T} fni = signal_fd_{s}(signal_ng_{s}(x[2 * (ncfft - k) + 1]), 2);
    const {T} ekr = signal_ad_{s}(fkr, fnr);
    const {T} eki = signal_ad_{s}(fki, fni);
    const {T} tr = signal_sb_{s}(fkr, fnr);
    const {T} ti = signal_sb_{s}(fki, fni);
    {T} okr;
    {T} oki;
    signal_cm_{s}(&okr, &oki, tr, ti, stw[2 * (k - 1)], stw[2 * (k - 1) + 1]);
    tmp[2 * k] = signal_ad_{s}(ekr, okr);
    tmp[2 * k + 1] = signal_ad_{s}(eki, oki);
    tmp[2 * (ncfft - k)] = signal_sb_{s}(ekr, okr);
    tmp[2 * (ncfft - k) + 1] = signal_ng_{s}(signal_sb_{s}(eki, oki));
  }}
  signal_cfft_{s}(y, tmp, ncfft, order, stages, nstages, tw, 1);
}}"""


for _dt, _d in _FFT_TYPES.items():
    _cfft, _rfft_text, _irfft_text = _fft_helper(_dt).split("@@SPLIT@@")
    _c = f"signal_cfft_{_d['s']}"
    define_helper(_c, _cfft, _c)
    define_helper(f"signal_rfft_{_d['s']}", _rfft_text, f"signal_rfft_{_d['s']}", deps=(_c,))
    define_helper(f"signal_irfft_{_d['s']}", _irfft_text, f"signal_irfft_{_d['s']}", deps=(_c,))


@register("signal_window")
def _window(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    x, w, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    k = p.in_shapes[1][0]
    rows = math.prod(p.in_shapes[0]) // k
    body = f"""\
int32_t r;
int32_t i;
for (r = 0; r < {rows}; ++r) {{
  for (i = 0; i < {k}; ++i) {{
    const int32_t raw = ((int32_t){x}[r * {k} + i] * (int32_t){w}[i]) >> {p.shift};
    {y}[r * {k} + i] = (int16_t)(raw < -32768 ? -32768 : (raw > 32767 ? 32767 : raw));
  }}
}}
return 0;"""
    return KernelCode(body=body)


@register("signal_fft_auto_scale")
def _fft_auto_scale(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    msb = ctx.helper("signal_msb32")
    x, y, sc = ctx.inputs[0], ctx.outputs[0], ctx.outputs[1]
    n = p.in_shapes[0][0]
    body = f"""\
int16_t mx = 0;
int32_t s;
int32_t i;
for (i = 0; i < {n}; ++i) {{
  const int16_t v = {x}[i];
  if (v > mx) {{
    mx = v;
  }} else if (-(int32_t)v > mx) {{
    mx = (int16_t)(-(int32_t)v);
  }}
}}
s = 16 - (int32_t){msb}((uint32_t)(int32_t)mx) - 1;
if (s <= 0) {{
  s = 0;
}}
for (i = 0; i < {n}; ++i) {{
  {y}[i] = (int16_t)((int32_t){x}[i] * ((int32_t)1 << s));
}}
{sc}[0] = s;
return 0;"""
    return KernelCode(body=body)


def _fft_tables(ctx: KernelContext, p: SignalParams, inverse: bool) -> tuple[str, str, int, str, str, str, str]:
    d = _FFT_TYPES[p.dtype]
    ncfft = p.fft_length // 2
    ctype = d["T"]
    factors = fft_factors(ncfft)
    stages, m = [], ncfft
    for f in factors:
        m //= f
        stages += [f, m]
    order = ctx.table("int32_t", fft_leaf_order(ncfft), "order")
    st = ctx.table("int32_t", stages, "stages")
    tw = ctx.table(ctype, [v for pair in fft_twiddles(ncfft, inverse, p.dtype) for v in pair], "tw")
    stw = ctx.table(ctype, [v for pair in fft_super_twiddles(p.fft_length, inverse, p.dtype) for v in pair], "stw")
    fn = ctx.helper(f"signal_{'irfft' if inverse else 'rfft'}_{d['s']}")
    return fn, ctype, len(factors), order, st, tw, stw


@register("signal_rfft")
def _rfft(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    fn, ctype, nst, order, st, tw, stw = _fft_tables(ctx, p, False)
    n = p.fft_length
    x, y = ctx.inputs[0], ctx.outputs[0]
    shape = p.in_shapes[0]
    length = shape[-1]
    rows = math.prod(shape[:-1])
    size = 4 if p.dtype != "int16" else 2
    body = f"""\
{ctype}* const work = ({ctype}*)(void*)scratch;
{ctype}* const tmp = work + {n};
int32_t r;
int32_t i;
for (r = 0; r < {rows}; ++r) {{
  for (i = 0; i < {length}; ++i) {{
    work[i] = {x}[r * {length} + i];
  }}
  for (i = {length}; i < {n}; ++i) {{
    work[i] = 0;
  }}
  {fn}(work, {y} + r * {n + 2}, tmp, {n // 2}, {order}, {st}, {nst}, {tw}, {stw});
}}
return 0;"""
    return KernelCode(body=body, scratch_bytes=2 * n * size)


@register("signal_irfft")
def _irfft(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    fn, ctype, nst, order, st, tw, stw = _fft_tables(ctx, p, True)
    n = p.fft_length
    x, y = ctx.inputs[0], ctx.outputs[0]
    rows = math.prod(p.in_shapes[0][:-1])
    size = 4 if p.dtype != "int16" else 2
    scale = ""
    if p.dtype == "float32":  # TFLM divides KISS FFT's (unnormalised) result by fft_length
        scale = f"""
  for (i = 0; i < {n}; ++i) {{
    {y}[r * {n} + i] /= (float){n};
  }}"""
    body = f"""\
{ctype}* const tmp = ({ctype}*)(void*)scratch;
int32_t r;
{"int32_t i;" if scale else ""}
for (r = 0; r < {rows}; ++r) {{
  {fn}({x} + r * {n + 2}, {y} + r * {n}, tmp, {n // 2}, {order}, {st}, {nst}, {tw}, {stw});{scale}
}}
return 0;"""
    return KernelCode(body=body, scratch_bytes=n * size)


@register("signal_energy")
def _energy(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    m = p.out_shapes[0][0]
    body = f"""\
int32_t i;
for (i = 0; i < {m}; ++i) {{
  if (i >= {p.start} && i < {p.end}) {{
    const int32_t re = {x}[2 * i];
    const int32_t im = {x}[2 * i + 1];
    {y}[i] = (uint32_t)(re * re) + (uint32_t)(im * im);
  }} else {{
    {y}[i] = 0u;
  }}
}}
return 0;"""
    return KernelCode(body=body)


@register("signal_filter_bank")
def _filter_bank(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    w, uw = ctx.const(1), ctx.const(2)
    fs = ctx.table("int32_t", p.freq_starts, "fs")
    ws = ctx.table("int32_t", p.weight_starts, "ws")
    wd = ctx.table("int32_t", p.widths, "wd")
    body = f"""\
uint64_t wacc = 0u;
uint64_t uacc = 0u;
int32_t ch;
int32_t j;
for (ch = 0; ch <= {p.num_channels}; ++ch) {{
  const uint32_t* in = {x} + {fs}[ch];
  const int16_t* wt = {w} + {ws}[ch];
  const int16_t* ut = {uw} + {ws}[ch];
  for (j = 0; j < {wd}[ch]; ++j) {{
    wacc += (uint64_t)(int64_t)wt[j] * (uint64_t)in[j];
    uacc += (uint64_t)(int64_t)ut[j] * (uint64_t)in[j];
  }}
  if (ch > 0) {{
    {y}[ch - 1] = wacc;
  }}
  wacc = uacc;
  uacc = 0u;
}}
return 0;"""
    return KernelCode(body=body)


@register("signal_filter_bank_square_root")
def _filter_bank_sqrt(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    sq = ctx.helper("signal_sqrt64")
    x, s, y = ctx.inputs[0], ctx.inputs[1], ctx.outputs[0]
    n = p.in_shapes[0][0]
    body = f"""\
const int32_t s = {s}[0];
int32_t i;
for (i = 0; i < {n}; ++i) {{
  {y}[i] = (s >= 0 && s < 32) ? ({sq}({x}[i]) >> s) : 0u;
}}
return 0;"""
    return KernelCode(body=body)


@register("signal_filter_bank_log")
def _filter_bank_log(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    lg = ctx.helper("signal_log32")
    x, y = ctx.inputs[0], ctx.outputs[0]
    n = p.in_shapes[0][0]
    body = f"""\
int32_t i;
for (i = 0; i < {n}; ++i) {{
  const uint32_t scaled = {x}[i] << {p.correction_bits};
  if (scaled > 1u) {{
    const uint32_t v = {lg}(scaled, {p.output_scale & 0xFFFFFFFF}u);
    {y}[i] = (int16_t)(v < 32767u ? v : 32767u);
  }} else {{
    {y}[i] = 0;
  }}
}}
return 0;"""
    return KernelCode(body=body)


@register("signal_pcan")
def _pcan(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    wdf = ctx.helper("signal_pcan")
    x, ne, lut, y = ctx.inputs[0], ctx.inputs[1], ctx.inputs[2], ctx.outputs[0]
    n = p.in_shapes[0][0]
    body = f"""\
int32_t i;
for (i = 0; i < {n}; ++i) {{
  const uint32_t gain = (uint32_t)(int32_t){wdf}({ne}[i], {lut});
  const uint32_t snr = (uint32_t)(((uint64_t){x}[i] * gain) >> {p.shift});
  {y}[i] = signal_pcan_shrink(snr);
}}
return 0;"""
    return KernelCode(body=body)


# --- stateful ops: their state lives in `state` (KernelCode.persistent_bytes), laid out as utvm.ops.signal's
# state_spec lists it, each part 16-byte aligned; all-zero bytes are the initial state. ---------------------
def _layout(sizes: list[int]) -> tuple[list[int], int]:
    offsets, pos = [], 0
    for n in sizes:
        offsets.append(pos)
        pos += (n + 15) // 16 * 16
    return offsets, max(pos, 16)


@register("signal_framer")
def _framer(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    x, y, v = ctx.inputs[0], ctx.outputs[0], ctx.outputs[1]
    size, step, cap = p.frame_size, p.frame_step, p.frame_size + p.frame_step
    (o_cnt, o_buf), total = _layout([4 * p.outer, 2 * p.outer * cap])
    base = size - step if p.prefill else 0
    body = f"""\
int32_t* const cnt = (int32_t*)(void*)({ctx.state} + {o_cnt});
int16_t* const bufs = (int16_t*)(void*)({ctx.state} + {o_buf});
uint8_t valid = 1u;
int32_t r;
int32_t f;
int32_t i;
for (r = 0; r < {p.outer}; ++r) {{
  int16_t* const buf = bufs + r * {cap};
  int32_t n = {base} + cnt[r];
  for (f = 0; f < {p.n_frames}; ++f) {{
    const int16_t* const in = {x} + (r * {p.n_frames} + f) * {step};
    int16_t* const out = {y} + (r * {p.n_frames} + f) * {size};
    for (i = 0; i < {step}; ++i) {{
      buf[n + i] = in[i];
    }}
    n += {step};
    if (n >= {size}) {{
      for (i = 0; i < {size}; ++i) {{
        out[i] = buf[i];
      }}
      for (i = 0; i < n - {step}; ++i) {{
        buf[i] = buf[i + {step}];
      }}
      n -= {step};
    }} else {{
      /* TFLM leaves a frame it cannot fill unwritten (never written before either: zeros here) */
      for (i = 0; i < {size}; ++i) {{
        out[i] = 0;
      }}
      valid = 0u;
    }}
  }}
  cnt[r] = n - {base};
}}
{v}[0] = valid;
return 0;"""
    return KernelCode(body=body, persistent_bytes=total)


@register("signal_stacker")
def _stacker(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    x, y, v = ctx.inputs[0], ctx.outputs[0], ctx.outputs[1]
    nc, size, step = p.num_channels, p.frame_size, p.frame_step
    (o_info, o_buf, o_last), total = _layout([8, 2 * size, 2 * size])
    body = f"""\
int32_t* const info = (int32_t*)(void*)({ctx.state} + {o_info});
int16_t* const buf = (int16_t*)(void*)({ctx.state} + {o_buf});
int16_t* const last = (int16_t*)(void*)({ctx.state} + {o_last});
int32_t n = info[0];
int32_t i;
int32_t k;
for (i = 0; i < {nc}; ++i) {{
  buf[n + i] = {x}[i];
}}
n += {nc};
if (info[1] == 0) {{
  for (k = 0; k < {p.left}; ++k) {{
    for (i = 0; i < {nc}; ++i) {{
      buf[n + i] = {x}[i];
    }}
    n += {nc};
  }}
  info[1] = 1;
}}
if (n >= {size}) {{
  for (i = 0; i < {size}; ++i) {{
    last[i] = buf[i];
  }}
  for (i = 0; i < n - {step}; ++i) {{
    buf[i] = buf[i + {step}];
  }}
  n -= {step};
  {v}[0] = 1u;
}} else {{
  {v}[0] = 0u; /* TFLM leaves the output unwritten: it keeps the last output */
}}
for (i = 0; i < {size}; ++i) {{
  {y}[i] = last[i];
}}
info[0] = n;
return 0;"""
    return KernelCode(body=body, persistent_bytes=total)


@register("signal_delay")
def _delay(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    n, d = p.frame_size, p.delay_length
    total_n = p.outer * n
    if d == 0:
        return KernelCode(body=f"int32_t i;\nfor (i = 0; i < {total_n}; ++i) {{\n  {y}[i] = {x}[i];\n}}\nreturn 0;")
    # out = (line ++ x)[:n], line = (line ++ x)[n:], walking the concatenation by index
    body = f"""\
int16_t* const lines = (int16_t*)(void*){ctx.state};
int32_t r;
int32_t i;
for (r = 0; r < {p.outer}; ++r) {{
  int16_t* const line = lines + r * {d};
  const int16_t* const in = {x} + r * {n};
  int16_t* const out = {y} + r * {n};
  for (i = 0; i < {n}; ++i) {{
    out[i] = i < {d} ? line[i] : in[i - {d}];
  }}
  for (i = 0; i < {d}; ++i) {{
    line[i] = i + {n} < {d} ? line[i + {n}] : in[i + {n} - {d}];
  }}
}}
return 0;"""
    return KernelCode(body=body, persistent_bytes=(2 * p.outer * d + 15) // 16 * 16)


@register("signal_overlap_add")
def _overlap_add(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    size, step = p.frame_size, p.frame_step
    t = "int16_t" if p.dtype == "int16" else "float"
    if p.dtype == "int16":
        acc = """{
      const int32_t s = (int32_t)buf[i] + (int32_t)in[i];
      buf[i] = (int16_t)(s < -32768 ? -32768 : (s > 32767 ? 32767 : s));
    }"""
    else:
        acc = "buf[i] += in[i];"
    body = f"""\
{t}* const bufs = ({t}*)(void*){ctx.state};
int32_t r;
int32_t f;
int32_t i;
for (r = 0; r < {p.outer}; ++r) {{
  {t}* const buf = bufs + r * {size};
  for (f = 0; f < {p.n_frames}; ++f) {{
    const {t}* const in = {x} + (r * {p.n_frames} + f) * {size};
    {t}* const out = {y} + (r * {p.n_frames} + f) * {step};
    for (i = 0; i < {size}; ++i) {acc}
    for (i = 0; i < {step}; ++i) {{
      out[i] = buf[i];
    }}
    for (i = 0; i < {size - step}; ++i) {{
      buf[i] = buf[i + {step}];
    }}
    for (i = {size - step}; i < {size}; ++i) {{
      buf[i] = 0;
    }}
  }}
}}
return 0;"""
    return KernelCode(body=body, persistent_bytes=(4 * p.outer * size + 15) // 16 * 16)


@register("signal_filter_bank_spectral_subtraction")
def _spectral_subtraction(ctx: KernelContext) -> KernelCode:
    p: SignalParams = ctx.params()
    x, y, ne = ctx.inputs[0], ctx.outputs[0], ctx.outputs[1]
    sm, oms, asm, aoms = p.smoothing
    body = f"""\
uint32_t* const noise = (uint32_t*)(void*){ctx.state};
int32_t i;
for (i = 0; i < {p.num_channels}; ++i) {{
  const uint32_t smoothing = (i & 1) == 0 ? {sm}u : {asm}u;
  const uint32_t one_minus = (i & 1) == 0 ? {oms}u : {aoms}u;
  const uint32_t sig = {x}[i] << {p.smoothing_bits};
  uint32_t est;
  uint32_t floor_v;
  uint32_t sub;
  noise[i] = (uint32_t)(((uint64_t)sig * smoothing + (uint64_t)noise[i] * one_minus) >> {p.spectral_subtraction_bits});
  est = noise[i];
  if (est > sig) {{
    est = sig;{" noise[i] = est;" if p.clamping else ""}
  }}
  floor_v = (uint32_t)(((uint64_t){x}[i] * {p.min_signal_remaining}u) >> {p.spectral_subtraction_bits});
  sub = (sig - est) >> {p.smoothing_bits};
  {y}[i] = sub > floor_v ? sub : floor_v;
  {ne}[i] = noise[i];
}}
return 0;"""
    return KernelCode(body=body, persistent_bytes=(4 * p.num_channels + 15) // 16 * 16)
