"""softmax over one axis; float32 and int8 (utvm.ops.softmax).

A row is the `n` elements along the axis, `inner` apart (1 when the axis is the last one).

float32: y = exp((x - max) * beta) / sum, with expf and one reciprocal per row (uses libm).

int8 (TFLite's fixed-point softmax, as the reference computes it): an int8 difference d = max - x lies in
[0, 255], so everything that depends on one element only is a 256-entry table computed at compile time
with the reference's own fixed-point functions (utvm.ops._quant):

    exp_table[d] = exp_on_negative_values(MBQM(-d, input_multiplier, input_left_shift), 5)  (Q0.31)
                   and 0 for -d < diff_min (such elements contribute nothing and come out -128)

Per row, in C: sum = sum of RoundingDivideByPOT(exp_table[d], 12) (Q12.19, wrapping like int32), then
TFLite's GetReciprocal (count leading zeros, gemmlowp's one_over_one_plus_x_for_x_in_0_1 by three
Newton-Raphson steps), and per element y = clamp(RoundingDivideByPOT(SRDHM(recip, exp), bits + 23) - 128).
The final shift can reach 34, so that one rounding divide is done in 64 bits.
"""

from __future__ import annotations

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, register
from utvm.ops import _quant
from utvm.ops.softmax import SCALED_DIFF_INTEGER_BITS, SoftmaxParams


@register("softmax")
def softmax(ctx: KernelContext) -> KernelCode:
    p: SoftmaxParams = ctx.params()
    shape = p.shape
    outer = int(np.prod(shape[:p.axis], dtype=np.int64))
    n = int(shape[p.axis])
    inner = int(np.prod(shape[p.axis + 1:], dtype=np.int64))
    if p.dtype == "float32":
        body = _float(ctx, p, n, inner)
        uses_libm = True
    elif p.dtype == "int8":
        body = _int8(ctx, p, n, inner)
        uses_libm = False
    else:
        raise ctx.error(f"no softmax kernel for dtype {p.dtype}")
    t = "float" if p.dtype == "float32" else "int8_t"
    x, y = ctx.inputs[0], ctx.outputs[0]
    row = "" if inner == 1 else f" * {inner}"
    code = f"""\
for (int32_t o = 0; o < {outer}; ++o) {{
  for (int32_t j = 0; j < {inner}; ++j) {{
    const {t}* const xr = {x} + o * {n * inner} + j;
    {t}* const yr = {y} + o * {n * inner} + j;
{_indent(body.replace("@S@", row), 2)}
  }}
}}
return 0;"""
    # Each row is read whole before any of its elements is written, and rows are disjoint.
    return KernelCode(body=code, inplace=(0,) if inner == 1 else (), uses_libm=uses_libm)


def _indent(text: str, levels: int) -> str:
    pad = "  " * levels
    return "\n".join(pad + ln if ln else ln for ln in text.splitlines())


def _float(ctx: KernelContext, p: SoftmaxParams, n: int, inner: int) -> str:
    beta = "" if p.beta == 1.0 else f" * {c_literal(p.beta, 'float32')}"
    return f"""\
float mx = xr[0];
for (int32_t i = 1; i < {n}; ++i) {{
  if (xr[i@S@] > mx) {{
    mx = xr[i@S@];
  }}
}}
float sum = 0.0f;
for (int32_t i = 0; i < {n}; ++i) {{
  const float e = expf((xr[i@S@] - mx){beta});
  yr[i@S@] = e;
  sum += e;
}}
const float inv = 1.0f / sum;
for (int32_t i = 0; i < {n}; ++i) {{
  yr[i@S@] *= inv;
}}"""


def exp_table(p: SoftmaxParams) -> np.ndarray:
    """Q0.31 exp of the rescaled difference -d for d = 0..255; 0 where -d < diff_min."""
    d = -np.arange(256, dtype=np.int64)
    rescaled = _quant.multiply_by_quantized_multiplier(d, p.input_multiplier, p.input_left_shift, p.rounding)
    e = _quant.exp_on_negative_values(rescaled, SCALED_DIFF_INTEGER_BITS)
    return np.where(d >= p.diff_min, e, 0).astype(np.int64)


def _int8(ctx: KernelContext, p: SoftmaxParams, n: int, inner: int) -> str:
    srdhm = ctx.helper("gemmlowp")  # tvm_srdhm and tvm_rdbpot
    table = ctx.table("int32_t", exp_table(p), "exp")
    return f"""\
int32_t mx = xr[0];
for (int32_t i = 1; i < {n}; ++i) {{
  if (xr[i@S@] > mx) {{
    mx = xr[i@S@];
  }}
}}
/* The sum of exp(x - max) in Q12.19, wrapping like the int32 sum it is (each term <= 2^19). */
uint32_t usum = 0;
for (int32_t i = 0; i < {n}; ++i) {{
  usum += (uint32_t)tvm_rdbpot({table}[mx - xr[i@S@]], 12);
}}
/* GetReciprocal(sum, 12): headroom, then 1 / (1 + x) for the sum scaled into [1, 2). */
int32_t headroom = 0;
while (headroom < 32 && (usum & 0x80000000u) == 0u) {{
  usum <<= 1;
  ++headroom;
}}
const int32_t x01 = (int32_t)(usum - 0x80000000u);
/* gemmlowp one_over_one_plus_x_for_x_in_0_1: half_denominator = RoundingHalfSum(x, 1) in Q0.31 */
const int64_t hsum = (int64_t)x01 + INT32_MAX;
const int32_t half_den = (int32_t)((hsum + (hsum >= 0 ? 1 : -1)) / 2);
/* Newton-Raphson for 1 / half_den in Q2.29: start at 48/17 - 32/17 * half_den. */
int32_t r = (int32_t)((uint32_t)1515870810 + (uint32_t){srdhm}(half_den, -1010580540));
for (int32_t k = 0; k < 3; ++k) {{
  const int32_t one_minus = (int32_t)((uint32_t)(1 << 29) - (uint32_t){srdhm}(half_den, r));
  const int32_t step = {srdhm}(r, one_minus);
  /* SaturatingRoundingMultiplyByPOT<2>(step) */
  const int32_t step4 = step > (1 << 29) - 1 ? INT32_MAX
                        : (step < -((1 << 29) - 1) ? INT32_MIN : (int32_t)((uint32_t)step << 2));
  r = (int32_t)((uint32_t)r + (uint32_t)step4);
}}
/* SaturatingRoundingMultiplyByPOT<1>: back from Q2.29 (of 1 / half_den) to Q0.31 (of 1 / (1 + x)). */
const int32_t recip = r > (1 << 30) - 1 ? INT32_MAX : (r < -((1 << 30) - 1) ? INT32_MIN : (int32_t)((uint32_t)r << 1));
/* y = RoundingDivideByPOT(SRDHM(recip, exp), 35 - headroom) - 128, in 64 bits (the exponent may exceed 31). */
const int32_t exponent = 35 - headroom;
const int64_t mask = ((int64_t)1 << exponent) - 1;
for (int32_t i = 0; i < {n}; ++i) {{
  const int64_t prod = (int64_t){srdhm}(recip, {table}[mx - xr[i@S@]]);
  const int64_t rem = prod & mask;
  const int64_t threshold = (mask >> 1) + (prod < 0 ? 1 : 0);
  const int64_t q = (prod >> exponent) + (rem > threshold ? 1 : 0) - 128;
  yr[i@S@] = (int8_t)(q < -128 ? -128 : (q > 127 ? 127 : q));
}}"""
