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

from utvm.compiler.kernels import KernelCode, KernelContext, register
from utvm.compiler.kernels.cemit import fill, for_loop, lines
from utvm.ops import _quant
from utvm.ops.softmax import SCALED_DIFF_INTEGER_BITS, SoftmaxParams

# Every template below is one row's body: `xr` / `yr` point at the row's first element, @N@ elements @S@ apart
# (`i@S@` is element i's offset: "" or " * inner").


@register("softmax")
def softmax(ctx: KernelContext) -> KernelCode:
    p: SoftmaxParams = ctx.params()
    shape = p.shape
    outer = int(np.prod(shape[:p.axis], dtype=np.int64))
    n = int(shape[p.axis])
    inner = int(np.prod(shape[p.axis + 1:], dtype=np.int64))
    row = "" if inner == 1 else f" * {inner}"
    if p.dtype == "float32":
        body = _float(ctx, p, n, row)
    elif p.dtype == "int8":
        body = _int8(ctx, p, n, row)
    elif p.dtype == "int16":
        body = _int16(ctx, p, n, row)
    else:
        raise ctx.error(f"no softmax kernel for dtype {p.dtype}")
    t = {"float32": "float", "int8": "int8_t", "int16": "int16_t"}[p.dtype]
    t_out = {"float32": "float", "int8": "int8_t", "int16": "int16_t"}[p.out_dtype or p.dtype]
    x, y = ctx.inputs[0], ctx.outputs[0]
    rows = for_loop("o", 0, outer, for_loop("j", 0, inner, [f"const {t}* const xr = {x} + o * {n * inner} + j;",
                                                             f"{t_out}* const yr = {y} + o * {n * inner} + j;", body]))
    # Each row is read whole before any of its elements is written, and rows are disjoint.
    same_size = t == t_out
    return KernelCode(body=lines(rows, "return 0;"), inplace=(0,) if inner == 1 and same_size else ())


_FLOAT = """\
float mx = xr[0];
for (int32_t i = 1; i < @N@; ++i) {
  if (xr[i@S@] > mx) {
    mx = xr[i@S@];
  }
}
float sum = 0.0f;
for (int32_t i = 0; i < @N@; ++i) {
  const float e = @EXPF@((xr[i@S@] - mx)@BETA@);
  yr[i@S@] = e;
  sum += e;
}
const float inv = 1.0f / sum;
for (int32_t i = 0; i < @N@; ++i) {
  yr[i@S@] *= inv;
}"""


def _float(ctx: KernelContext, p: SoftmaxParams, n: int, row: str) -> str:
    beta = "" if p.beta == 1.0 else f" * {ctx.float_literal(p.beta)}"
    return fill(_FLOAT, N=n, S=row, EXPF=ctx.libm("expf"), BETA=beta)


def exp_table(p: SoftmaxParams) -> np.ndarray:
    """Q0.31 exp of the rescaled difference -d for d = 0..255; 0 where -d < diff_min."""
    d = -np.arange(256, dtype=np.int64)
    rescaled = _quant.multiply_by_quantized_multiplier(d, p.input_multiplier, p.input_left_shift, p.rounding)
    e = _quant.exp_on_negative_values(rescaled, SCALED_DIFF_INTEGER_BITS)
    return np.where(d >= p.diff_min, e, 0).astype(np.int64)


# @EXP@: the exp table, @SRDHM@ gemmlowp's SaturatingRoundingDoublingHighMul; the output type @T@ in [@LO@, @HI@]
# with the final exponent @E@ - headroom and the offset @O@.
_INT8 = """\
int32_t mx = xr[0];
for (int32_t i = 1; i < @N@; ++i) {
  if (xr[i@S@] > mx) {
    mx = xr[i@S@];
  }
}
/* The sum of exp(x - max) in Q12.19, wrapping like the int32 sum it is (each term <= 2^19). */
uint32_t usum = 0;
for (int32_t i = 0; i < @N@; ++i) {
  usum += (uint32_t)tvm_rdbpot(@EXP@[mx - xr[i@S@]], 12);
}
/* GetReciprocal(sum, 12): headroom, then 1 / (1 + x) for the sum scaled into [1, 2). */
int32_t headroom = 0;
while (headroom < 32 && (usum & 0x80000000u) == 0u) {
  usum <<= 1;
  ++headroom;
}
const int32_t x01 = (int32_t)(usum - 0x80000000u);
/* gemmlowp one_over_one_plus_x_for_x_in_0_1: half_denominator = RoundingHalfSum(x, 1) in Q0.31 */
const int64_t hsum = (int64_t)x01 + INT32_MAX;
const int32_t half_den = (int32_t)((hsum + (hsum >= 0 ? 1 : -1)) / 2);
/* Newton-Raphson for 1 / half_den in Q2.29: start at 48/17 - 32/17 * half_den. */
int32_t r = (int32_t)((uint32_t)1515870810 + (uint32_t)@SRDHM@(half_den, -1010580540));
for (int32_t k = 0; k < 3; ++k) {
  const int32_t one_minus = (int32_t)((uint32_t)(1 << 29) - (uint32_t)@SRDHM@(half_den, r));
  const int32_t step = @SRDHM@(r, one_minus);
  /* SaturatingRoundingMultiplyByPOT<2>(step) */
  const int32_t step4 = step > (1 << 29) - 1 ? INT32_MAX
                        : (step < -((1 << 29) - 1) ? INT32_MIN : (int32_t)((uint32_t)step << 2));
  r = (int32_t)((uint32_t)r + (uint32_t)step4);
}
/* SaturatingRoundingMultiplyByPOT<1>: back from Q2.29 (of 1 / half_den) to Q0.31 (of 1 / (1 + x)). */
const int32_t recip = r > (1 << 30) - 1 ? INT32_MAX : (r < -((1 << 30) - 1) ? INT32_MIN : (int32_t)((uint32_t)r << 1));
/* y = RoundingDivideByPOT(SRDHM(recip, exp), @E@ - headroom) @O@, in 64 bits (the exponent may exceed 31). */
const int32_t exponent = @E@ - headroom;
const int64_t mask = ((int64_t)1 << exponent) - 1;
for (int32_t i = 0; i < @N@; ++i) {
  const int64_t prod = (int64_t)@SRDHM@(recip, @EXP@[mx - xr[i@S@]]);
  const int64_t rem = prod & mask;
  const int64_t threshold = (mask >> 1) + (prod < 0 ? 1 : 0);
  const int64_t q = (prod >> exponent) + (rem > threshold ? 1 : 0) @O@;
  yr[i@S@] = (@T@)(q < @LO@ ? @LO@ : (q > @HI@ ? @HI@ : q));
}"""


def _int8(ctx: KernelContext, p: SoftmaxParams, n: int, row: str) -> str:
    srdhm = ctx.helper("gemmlowp")  # tvm_srdhm and tvm_rdbpot
    # int8 output: exponent headroom-relative 35 (bits + 31 - 8 with bits = 12 - headroom), offset -128;
    # int16 output (TFLM's int8 -> int16): 27 and -32768
    bits = 16 if p.out_dtype == "int16" else 8
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return fill(_INT8, N=n, S=row, EXP=ctx.table("int32_t", exp_table(p), "exp"), SRDHM=srdhm, E=12 + 31 - bits,
                O=f"- {-lo}", T="int16_t" if bits == 16 else "int8_t", LO="(-32767 - 1)" if bits == 16 else lo,
                HI=hi)


# TFLM's SoftmaxInt16 in three parts around its two table lookups (_LOOKUP16): @RQ@ is the double-rounding
# requantization helper.
_INT16_MAX = """\
int32_t mx = xr[0];
int32_t sum = 0;
int32_t hp1 = 0;
int32_t ss;
int16_t recip;
for (int32_t i = 1; i < @N@; ++i) {
  if (xr[i@S@] > mx) {
    mx = xr[i@S@];
  }
}"""
_INT16_RECIP = """\
while (hp1 < 32 && (((uint32_t)sum << hp1) & 0x80000000u) == 0u) {
  ++hp1;
}
ss = (int32_t)((((int64_t)sum << (hp1 - 1)) + (1 << 13)) >> 14) - ((1 << 15) + (1 << 16));
ss = ss < -32768 ? -32768 : (ss > 32767 ? 32767 : ss);"""
_INT16_SCALE = """\
for (int32_t i = 0; i < @N@; ++i) {
  const int32_t right = 31 - hp1;
  const int64_t r = ((int64_t)yr[i@S@] * recip + ((int64_t)1 << (right - 1))) >> right;
  yr[i@S@] = (int16_t)(r < 0 ? 0 : (r > 32767 ? 32767 : r));
}"""
# @OUT@ = table @L@ at the int16 value @V@: 512 intervals, interpolated on the low 7 bits
_LOOKUP16 = """\
{
  const int32_t idx = 256 + (@V@ >> 7);
  const int32_t base = @L@[idx];
  const int32_t slope = (int16_t)(@L@[idx + 1] - base);
  @OUT@ = (int16_t)(base + ((slope * (@V@ & 0x7F) + 64) >> 7));
}"""


def _int16(ctx: KernelContext, p: SoftmaxParams, n: int, row: str) -> str:
    """TFLM's SoftmaxInt16: exp through a 513-entry LUT (interpolated on 7 bits), the sum's reciprocal
    through a LUT of 1 / (1 + x); the exp values are cached in the output row."""
    rq = ctx.helper("requant", "double")
    exp_lut = ctx.table("int16_t", list(p.exp_lut), "exp")
    recip_lut = ctx.table("int16_t", list(p.recip_lut), "recip")
    exp_row = for_loop("i", 0, n, [
        f"int32_t sv = {rq}((int32_t)xr[i{row}] - mx, {p.input_multiplier}, {p.input_left_shift}) + 32767;",
        "sv = sv < -32768 ? -32768 : (sv > 32767 ? 32767 : sv);",
        fill(_LOOKUP16, V="sv", L=exp_lut, OUT=f"yr[i{row}]"),
        f"sum += yr[i{row}];"])
    return lines(fill(_INT16_MAX, N=n, S=row), exp_row, _INT16_RECIP, fill(_LOOKUP16, V="ss", L=recip_lut, OUT="recip"),
                 fill(_INT16_SCALE, N=n, S=row))
