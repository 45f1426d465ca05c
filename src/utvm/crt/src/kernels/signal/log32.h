/* utvm runtime, src/kernels/signal/log32.h: TFLM's Log32 (signal/src/log.cc); the table is its kLogLut
   (utvm.ops.signal.LOG_LUT). Copied verbatim into generated sources by the code generator (README.md).
   Needs <stdint.h> and msb32.h. */

static const uint16_t signal_log_lut[130] = {
  0, 224, 442, 654, 861, 1063, 1259, 1450, 1636, 1817, 1992, 2163, 2329, 2490, 2646, 2797,
  2944, 3087, 3224, 3358, 3487, 3611, 3732, 3848, 3960, 4068, 4172, 4272, 4368, 4460, 4549, 4633,
  4714, 4791, 4864, 4934, 5001, 5063, 5123, 5178, 5231, 5280, 5326, 5368, 5408, 5444, 5477, 5507,
  5533, 5557, 5578, 5595, 5610, 5622, 5631, 5637, 5640, 5641, 5638, 5633, 5626, 5615, 5602, 5586,
  5568, 5547, 5524, 5498, 5470, 5439, 5406, 5370, 5332, 5291, 5249, 5203, 5156, 5106, 5054, 5000,
  4944, 4885, 4825, 4762, 4697, 4630, 4561, 4490, 4416, 4341, 4264, 4184, 4103, 4020, 3935, 3848,
  3759, 3668, 3575, 3481, 3384, 3286, 3186, 3084, 2981, 2875, 2768, 2659, 2549, 2437, 2323, 2207,
  2090, 1971, 1851, 1729, 1605, 1480, 1353, 1224, 1094, 963, 830, 695, 559, 421, 282, 142,
  0, 0};
/* TFLM's Log32: log2 by table interpolation, times ln 2 (Q16), times out_scale (Q16), uint32 arithmetic. */
static inline uint32_t signal_log32(uint32_t x, uint32_t out_scale) {
  const uint32_t integer = signal_msb32(x) - 1u;
  int32_t frac = (int32_t)(x - ((uint32_t)1 << integer));
  uint32_t base_seg;
  int32_t c0;
  int32_t c1;
  int32_t rel_pos;
  uint32_t log2v;
  uint32_t loge;
  if (integer < 16u) {
    frac = (int32_t)((uint32_t)frac << (16u - integer));
  } else {
    frac >>= (integer - 16u);
  }
  base_seg = (uint32_t)frac >> 9;
  c0 = (int32_t)signal_log_lut[base_seg];
  c1 = (int32_t)signal_log_lut[base_seg + 1u];
  rel_pos = ((c1 - c0) * (frac - (int32_t)(512u * base_seg))) >> 16;
  log2v = (integer << 16) + (uint32_t)(frac + c0 + rel_pos);
  loge = (uint32_t)(((uint64_t)45426u * log2v + 32768u) >> 16);
  return (out_scale * loge + 32768u) >> 16;
}
