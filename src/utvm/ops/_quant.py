"""Fixed-point arithmetic of TFLite's integer kernels: the one place where rounding lives.

Everything here is vectorised numpy on int64 arrays holding int32 values (C's int32 wrap-around is
reproduced where C would wrap). Kernels call these helpers and never branch on the rounding mode.

Rounding modes, chosen per compile (`ROUNDINGS`), and what each kernel family does in each
(`kernel_rounding(mode, op)`, the one table of it):

* "single" (the default) reproduces ai-edge-litert 2.3's reference kernels (BUILTIN_REF) bit-exactly.
  Measured against that interpreter (tests/ops/test_rounding_policy.py): only FULLY_CONNECTED (`dense`)
  requantizes with single rounding there; conv2d, depthwise_conv2d, add, sub, mul, relu/relu6/clip,
  quantize (int8 -> int8), mean and batch matmul all requantize with gemmlowp double rounding.
* "double" reproduces TensorFlow Lite Micro's requantization: double rounding in every kernel.
  (int8 logistic/tanh are lookup tables in both modes: LiteRT's float LUT in "single", TFLM's gemmlowp
  fixed-point functions in "double"; int8 relu6 in "double" clamps in the input's domain, as TFLM does.)

Contents:

* `quantize_multiplier(real, rounding)`: TFLite's QuantizeMultiplier — a positive double scale becomes an
  int32 Q31 multiplier and a power-of-two exponent (`real ~= multiplier * 2**(shift - 31)`).
* `multiply_by_quantized_multiplier(x, multiplier, shift, rounding)`:
    - "single": TFLite built with TFLITE_SINGLE_ROUNDING: `(x * m + 2**(30 - shift)) >> (31 - shift)`,
      one rounding to nearest, ties towards +infinity;
    - "double": gemmlowp's SaturatingRoundingDoublingHighMul (to nearest, ties towards +infinity) followed
      by RoundingDivideByPOT (to nearest, ties away from zero): two roundings.
  The same helper also stands for TFLite's `...SmallerThanOneExp` (shift <= 0) and `...GreaterThanOne`
  (shift >= 0) variants: with either rounding they are exactly this function restricted to those shifts.
* gemmlowp's fixed-point transcendental functions (`exp_on_negative_values`, `logistic`, `tanh`,
  `one_over_one_plus_x_for_x_in_0_1`) used by softmax, plus `get_reciprocal`.
* activation clamp ranges (`activation_range_quantized`, `activation_range_float`).
"""

from __future__ import annotations

import math

import numpy as np

ROUNDINGS = ("single", "double")

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

# gemmlowp: the raw value of 1.0 in a FixedPoint<int32, 0> (Q0.31) saturates to INT32_MAX.
Q0_ONE = INT32_MAX


# Per compile mode: the ops whose requantization uses single rounding (all others: double).
_SINGLE_ROUNDING_OPS: dict[str, frozenset[str]] = {
    "single": frozenset({"dense"}),  # ai-edge-litert 2.3 BUILTIN_REF: FULLY_CONNECTED only
    "double": frozenset(),           # TFLM: gemmlowp double rounding everywhere
}


def check_rounding(rounding: str) -> str:
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, not {rounding!r}")
    return rounding


def kernel_rounding(mode: str, op: str) -> str:
    """The rounding ("single" or "double") the kernel of canonical op `op` ("dense", "conv2d", ...) uses
    when the graph is compiled in rounding `mode`. Every `prepare` resolves it once and stores it in its
    params, so kernels (and the C generated from params) never look at the mode."""
    return "single" if op in _SINGLE_ROUNDING_OPS[check_rounding(mode)] else "double"


def wrap32(v: np.ndarray | int) -> np.ndarray:
    """Reduce int64 values modulo 2**32 into the int32 range (C's two's complement truncation)."""
    a = np.asarray(v, dtype=np.int64)
    return ((a + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _i64(v: np.ndarray | int) -> np.ndarray:
    return np.asarray(v, dtype=np.int64)


# --- QuantizeMultiplier -------------------------------------------------------------------------------------
def quantize_multiplier(real: float, rounding: str = "single") -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: `real` (a non-negative double) -> (int32 multiplier, shift).

    frexp gives real = q * 2**shift with q in [0.5, 1); the multiplier is round-half-away(q * 2**31). A
    multiplier that rounds up to 2**31 is halved (shift + 1). Shifts below -31 flush to (0, 0). With single
    rounding a shift above 30 saturates to (2**31 - 1, 30), because the single-rounding multiply cannot
    shift further.
    """
    check_rounding(rounding)
    real = float(real)
    if real < 0 or not math.isfinite(real):
        raise ValueError(f"quantized multiplier needs a finite non-negative scale, got {real!r}")
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = _round_half_away(q * (1 << 31))
    if q_fixed == (1 << 31):
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if rounding == "single" and shift > 30:
        return INT32_MAX, 30
    return int(q_fixed), int(shift)


def quantize_multipliers(reals: np.ndarray | list[float], rounding: str = "single") -> tuple[np.ndarray, np.ndarray]:
    """`quantize_multiplier` over a vector of scales -> (int32 multipliers, int32 shifts)."""
    pairs = [quantize_multiplier(float(r), rounding) for r in np.asarray(reals, dtype=np.float64).ravel()]
    m = np.array([p[0] for p in pairs], dtype=np.int32)
    s = np.array([p[1] for p in pairs], dtype=np.int32)
    return m, s


def quantize_multiplier_greater_than_one(real: float, rounding: str = "single") -> tuple[int, int]:
    """TFLite's QuantizeMultiplierGreaterThanOne: as `quantize_multiplier`, for real > 1 (shift >= 0)."""
    if not real > 1.0:
        raise ValueError(f"multiplier {real!r} must be greater than one")
    m, s = quantize_multiplier(real, rounding)
    assert s >= 0
    return m, s


def _round_half_away(x: float) -> int:
    """C's std::round / TfLiteRound on a double: ties away from zero."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Vectorised std::round (ties away from zero), in the input's float dtype."""
    x = np.asarray(x)
    return np.sign(x) * np.floor(np.abs(x) + x.dtype.type(0.5))


# --- gemmlowp primitives -------------------------------------------------------------------------------------
def saturating_rounding_doubling_high_mul(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 values: floor(a * b / 2**31 + 1/2), i.e. to
    nearest with ties towards +infinity (the nudge 1 - 2**30 for negative products, then C's truncating
    division); the one overflowing case (INT32_MIN * INT32_MIN) saturates to INT32_MAX."""
    a = _i64(a)
    b = _i64(b)
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    v = ab + nudge
    # C's integer division truncates toward zero; numpy's >> floors.
    high = np.where(v >= 0, v >> 31, -((-v) >> 31))
    return np.where(overflow, INT32_MAX, high)


def rounding_divide_by_pot(x: np.ndarray | int, exponent: np.ndarray | int) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT: x / 2**exponent rounded to nearest, ties away from zero; 0 <= exponent <= 31."""
    x = _i64(x)
    e = _i64(exponent)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def saturating_rounding_multiply_by_pot(x: np.ndarray | int, exponent: int) -> np.ndarray:
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> on int32 values (exponent may be negative)."""
    x = _i64(x)
    if exponent == 0:
        return x
    if exponent < 0:
        return rounding_divide_by_pot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    result = wrap32(x << exponent)
    result = np.where(x > threshold, INT32_MAX, result)
    return np.where(x < -threshold, INT32_MIN, result)


# --- MultiplyByQuantizedMultiplier --------------------------------------------------------------------------
def multiply_by_quantized_multiplier(x: np.ndarray | int, multiplier: np.ndarray | int, shift: np.ndarray | int,
                                     rounding: str = "single") -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier(int32 x, int32 multiplier, int shift) -> int32 (as int64 array).

    `multiplier` and `shift` broadcast against `x` (per-channel requantisation passes vectors along the
    last axis). Results are wrapped to int32 like C's static_cast.
    """
    x = _i64(x)
    m = _i64(multiplier)
    s = _i64(shift)
    if rounding == "single":
        total_shift = 31 - s
        rnd = np.int64(1) << (total_shift - 1)
        return wrap32((x * m + rnd) >> total_shift)
    if rounding == "double":
        left = np.maximum(s, 0)
        right = np.maximum(-s, 0)
        return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(wrap32(x << left), m), right)
    raise ValueError(f"rounding must be one of {ROUNDINGS}, not {rounding!r}")


# --- gemmlowp fixed-point transcendental functions (raw int32 values, vectorised) ---------------------------
def _fx_mul(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """FixedPoint<int32, ia> * FixedPoint<int32, ib> -> FixedPoint<int32, ia + ib>: SRDHM of the raws."""
    return saturating_rounding_doubling_high_mul(a, b)


def _rounding_half_sum(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp RoundingHalfSum for int32: (a + b + sign) / 2 with C truncating division."""
    s = _i64(a) + b
    v = s + np.where(s >= 0, 1, -1)
    return np.where(v >= 0, v // 2, -((-v) // 2))


def exp_on_interval_between_negative_one_quarter_and_0_excl(a: np.ndarray) -> np.ndarray:
    """exp(a) for a (Q0.31 raw) in [-1/4, 0): Taylor series around -1/8; result Q0.31 raw."""
    constant_term = 1895147668  # exp(-1/8)
    constant_1_over_3 = 715827883
    x = _i64(a) + (1 << 28)  # + 1/8
    x2 = _fx_mul(x, x)
    x3 = _fx_mul(x2, x)
    x4 = _fx_mul(x2, x2)
    x4_over_4 = saturating_rounding_multiply_by_pot(x4, -2)
    poly = saturating_rounding_multiply_by_pot(_fx_mul(x4_over_4 + x3, constant_1_over_3) + x2, -1)
    return wrap32(constant_term + _fx_mul(constant_term, x + poly))


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp exp_on_negative_values: `a` raw FixedPoint<int32, integer_bits> (a <= 0) -> exp(a) as Q0.31 raw."""
    a = _i64(a)
    frac_bits = 31 - integer_bits
    one_quarter = 1 << (frac_bits - 2)
    mask = one_quarter - 1
    a_mod_quarter_minus_one_quarter = (a & mask) - one_quarter
    result = exp_on_interval_between_negative_one_quarter_and_0_excl(
        saturating_rounding_multiply_by_pot(a_mod_quarter_minus_one_quarter, integer_bits))
    remainder = a_mod_quarter_minus_one_quarter - a
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = 1 << (frac_bits + exponent)
            result = np.where((remainder & bit) != 0, _fx_mul(result, multiplier), result)
    if integer_bits > 5:
        clamp = -(1 << (36 - integer_bits))
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, Q0_ONE, result)


def _newton_reciprocal_x2(half_denominator: np.ndarray) -> np.ndarray:
    """Three Newton-Raphson steps for 1/half_denominator, in FixedPoint<int32, 2> (shared by gemmlowp's
    one_over_one_plus_x_for_x_in_0_1 and one_minus_x_over_one_plus_x_for_x_in_0_1)."""
    constant_48_over_17 = 1515870810
    constant_neg_32_over_17 = -1010580540
    one_f2 = 1 << 29
    x = wrap32(constant_48_over_17 + _fx_mul(half_denominator, constant_neg_32_over_17))
    for _ in range(3):
        half_denominator_times_x = _fx_mul(half_denominator, x)
        one_minus = wrap32(one_f2 - half_denominator_times_x)
        x = wrap32(x + saturating_rounding_multiply_by_pot(_fx_mul(x, one_minus), 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """gemmlowp: 1 / (1 + a) for a (Q0.31 raw) in [0, 1); result Q0.31 raw."""
    half_denominator = _rounding_half_sum(a, Q0_ONE)
    x = _newton_reciprocal_x2(half_denominator)
    return saturating_rounding_multiply_by_pot(x, 1)  # ExactMulByPot<-1> then Rescale<0> from Q1


def one_minus_x_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """gemmlowp: (1 - a) / (1 + a) for a (Q0.31 raw) in [0, 1); result Q0.31 raw."""
    half_denominator = _rounding_half_sum(a, Q0_ONE)
    x = _newton_reciprocal_x2(half_denominator)
    return saturating_rounding_multiply_by_pot(wrap32(x - (1 << 29)), 2)


def logistic(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp logistic of a raw FixedPoint<int32, integer_bits>; result Q0.31 raw."""
    a = _i64(a)
    positive = a > 0
    abs_a = np.where(positive, a, -a)
    r_pos = one_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(-abs_a, integer_bits))
    r_neg = wrap32(Q0_ONE - r_pos)
    return np.where(a == 0, 1 << 30, np.where(positive, r_pos, r_neg))


def tanh(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp tanh of a raw FixedPoint<int32, integer_bits>; result Q0.31 raw."""
    a = _i64(a)
    negative = a < 0
    n = np.where(negative, -a, a)
    # ExactMulByPot<1>(-n): same raw, one more integer bit.
    t = one_minus_x_over_one_plus_x_for_x_in_0_1(exp_on_negative_values(-n, integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, -t, t))


def count_leading_zeros_u32(x: np.ndarray) -> np.ndarray:
    """Leading zero bits of x as a uint32 (32 for 0), exact integer arithmetic."""
    v = _i64(x) & 0xFFFFFFFF
    bit_length = np.zeros(v.shape, dtype=np.int64)
    for step in (16, 8, 4, 2, 1):
        big = v >= (np.int64(1) << step)
        bit_length += np.where(big, step, 0)
        v = np.where(big, v >> step, v)
    bit_length += v > 0
    return 32 - bit_length


def get_reciprocal(x: np.ndarray, x_integer_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """TFLite GetReciprocal: for a positive raw FixedPoint<int32, x_integer_bits>, return
    (Q0.31 raw of 1 / (x scaled into [1, 2)), num_bits_over_unit)."""
    x = _i64(x)
    headroom_plus_one = count_leading_zeros_u32(x)
    num_bits_over_unit = x_integer_bits - headroom_plus_one
    shifted_sum_minus_one = wrap32(((x << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))
    return one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one), num_bits_over_unit


def calculate_input_radius(input_integer_bits: int, input_left_shift: int, total_signed_bits: int = 31) -> int:
    """TFLite CalculateInputRadius: the largest input difference that does not saturate the rescale."""
    max_input_rescaled = (1.0 * ((1 << input_integer_bits) - 1) * (1 << (total_signed_bits - input_integer_bits))
                          / (1 << input_left_shift))
    return int(math.floor(max_input_rescaled))


# --- activation ranges -------------------------------------------------------------------------------------
def _qrange(dtype: str) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def quantize_scalar(f: float, scale: float, zero_point: int) -> int:
    """TFLite's `zero_point + (int)TfLiteRound(f / scale)` with the division in float32."""
    q = np.float32(f) / np.float32(scale)
    return int(zero_point) + _round_half_away(float(q))


def activation_range_quantized(activation: str, scale: float, zero_point: int, dtype: str = "int8") -> tuple[int, int]:
    """TFLite CalculateActivationRangeQuantized: the clamp range of a fused activation in the quantized
    output domain. "tanh"/"sign_bit" have no clamp there (TFLite's kernels treat them as "none")."""
    qmin, qmax = _qrange(dtype)
    if activation == "relu":
        return max(qmin, quantize_scalar(0.0, scale, zero_point)), qmax
    if activation == "relu6":
        return max(qmin, quantize_scalar(0.0, scale, zero_point)), min(qmax, quantize_scalar(6.0, scale, zero_point))
    if activation == "relu_n1_to_1":
        return (max(qmin, quantize_scalar(-1.0, scale, zero_point)),
                min(qmax, quantize_scalar(1.0, scale, zero_point)))
    return qmin, qmax


def activation_range_float(activation: str) -> tuple[float, float]:
    """TFLite CalculateActivationRange for float: the clamp applied after a float op."""
    lo, hi = float(np.finfo(np.float32).min), float(np.finfo(np.float32).max)
    if activation == "relu":
        return 0.0, hi
    if activation == "relu6":
        return 0.0, 6.0
    if activation == "relu_n1_to_1":
        return -1.0, 1.0
    return lo, hi


def inv_sqrt_multiplier_exp(v: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's GetInvSqrtQuantizedMultiplierExp(v, reverse_shift = -1) for int32 v >= 0, vectorised:
    (multiplier, left shift) with 1/sqrt(v) ~= multiplier * 2^(shift - 31), by gemmlowp fixed-point
    Newton-Raphson (five steps from 1.0 in Q3.28). rsqrt and l2_normalization use it; the C kernels share the
    `inv_sqrt` helper (utvm.compiler.kernels)."""
    v = np.asarray(v, np.int64)
    small = v <= 1
    x = np.where(small, 2, v)
    shift = np.full(x.shape, 11, np.int64)
    while np.any(x >= (1 << 29)):
        big = x >= (1 << 29)
        x = np.where(big, x // 4, x)
        shift = shift + big
    lz = count_leading_zeros_u32(x)
    pairs = (lz - 1) // 2 - 1
    shift = shift - pairs
    x = x << (2 * pairs)
    half_input = rounding_divide_by_pot(x >> 1, 1)
    half_three = (1 << 28) + (1 << 27)
    r = np.full(x.shape, 1 << 28, np.int64)
    srdhm = saturating_rounding_doubling_high_mul
    for _ in range(5):
        r3 = saturating_rounding_multiply_by_pot(srdhm(srdhm(r, r), r), 6)
        r = saturating_rounding_multiply_by_pot(wrap32(srdhm(half_three, r) - srdhm(half_input, r3)), 3)
    r = srdhm(r, 1518500250)
    neg = shift < 0
    r = np.where(neg, wrap32(r << np.where(neg, -shift, 0)), r)
    shift = np.where(neg, 0, shift)
    r = np.where(small, INT32_MAX, r)
    shift = np.where(small, 0, shift)
    return r, -shift
