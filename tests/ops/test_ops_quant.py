"""utvm.ops._quant: QuantizeMultiplier, the two MultiplyByQuantizedMultiplier roundings and gemmlowp's
fixed-point functions, checked against (a) a scalar transcription of gemmlowp's C code with C integer
semantics and (b) the exact rational arithmetic each function approximates, on edge cases (ties,
negative values, saturation, extreme shifts) and random values."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from utvm.ops import _quant as q

MIN, MAX = -(1 << 31), (1 << 31) - 1


# --- scalar transcription of gemmlowp / TFLite (C semantics, Python ints) -----------------------------------
def c_div(a: int, b: int) -> int:
    """C's integer division: truncation toward zero."""
    qq = abs(a) // abs(b)
    return qq if (a >= 0) == (b > 0) else -qq


def c_int32(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def g_srdhm(a: int, b: int) -> int:
    """gemmlowp SaturatingRoundingDoublingHighMul(std::int32_t a, std::int32_t b)."""
    overflow = a == b and a == MIN
    a_64, b_64 = a, b
    ab_64 = a_64 * b_64
    nudge = (1 << 30) if ab_64 >= 0 else (1 - (1 << 30))
    ab_x2_high32 = c_div(ab_64 + nudge, 1 << 31)
    return MAX if overflow else ab_x2_high32


def g_rdbpot(x: int, exponent: int) -> int:
    """gemmlowp RoundingDivideByPOT(std::int32_t x, int exponent)."""
    mask = (1 << exponent) - 1
    zero = 0
    one = 1
    remainder = x & mask
    threshold = (mask >> 1) + (one if x < zero else zero)
    return (x >> exponent) + (one if remainder > threshold else zero)


def t_mbqm_double(x: int, m: int, shift: int) -> int:
    left = shift if shift > 0 else 0
    right = 0 if shift > 0 else -shift
    return g_rdbpot(g_srdhm(c_int32(x * (1 << left)), m), right)


def t_mbqm_single(x: int, m: int, shift: int) -> int:
    total_shift = 31 - shift
    rnd = 1 << (total_shift - 1)
    return c_int32((x * m + rnd) >> total_shift)


# --- exact arithmetic --------------------------------------------------------------------------------------
def round_half_up(f: Fraction) -> int:
    return math.floor(f + Fraction(1, 2))


def round_half_away(f: Fraction) -> int:
    return math.floor(f + Fraction(1, 2)) if f >= 0 else -math.floor(-f + Fraction(1, 2))


EDGE_A = [0, 1, -1, 2, -2, 3, -3, 127, -128, 255, -255, 1 << 20, -(1 << 20), 123456789, -123456789,
          MAX, MIN, MIN + 1, MAX - 1, 1 << 30, -(1 << 30)]
EDGE_M = [0, 1, 1 << 30, (1 << 30) + 1, (1 << 31) - 1, 1073741823, 1518500250, 1879048192, MIN, -1, MAX]


def test_srdhm_matches_gemmlowp_and_exact_rounding_on_edges() -> None:
    a = np.array([x for x in EDGE_A for _ in EDGE_M], dtype=np.int64)
    b = np.array([m for _ in EDGE_A for m in EDGE_M], dtype=np.int64)
    got = q.saturating_rounding_doubling_high_mul(a, b)
    for x, m, g in zip(a.tolist(), b.tolist(), got.tolist(), strict=True):
        assert g == g_srdhm(x, m), (x, m)
        exact = MAX if x == m == MIN else round_half_up(Fraction(x * m, 1 << 31))
        assert g == exact, (x, m)


def test_srdhm_ties_and_saturation() -> None:
    # a * b / 2**31 = +-0.5, +-1.5: ties go to +infinity
    assert q.saturating_rounding_doubling_high_mul(1, 1 << 30) == 1
    assert q.saturating_rounding_doubling_high_mul(-1, 1 << 30) == 0
    assert q.saturating_rounding_doubling_high_mul(3, 1 << 30) == 2
    assert q.saturating_rounding_doubling_high_mul(-3, 1 << 30) == -1
    assert q.saturating_rounding_doubling_high_mul(MIN, MIN) == MAX  # the only overflow: saturates
    assert q.saturating_rounding_doubling_high_mul(MIN, MAX) == -MAX
    assert q.saturating_rounding_doubling_high_mul(MAX, MAX) == MAX - 1


@pytest.mark.parametrize("exponent", [0, 1, 2, 5, 12, 23, 30, 31])
def test_rounding_divide_by_pot(exponent: int) -> None:
    xs = sorted({*EDGE_A, *(k << max(exponent - 1, 0) for k in range(-7, 8)),
                 *((k << exponent) + (1 << max(exponent - 1, 0)) for k in range(-5, 5))})
    xs = [x for x in xs if MIN <= x <= MAX]
    got = q.rounding_divide_by_pot(np.array(xs, dtype=np.int64), exponent)
    for x, g in zip(xs, got.tolist(), strict=True):
        assert g == g_rdbpot(x, exponent), (x, exponent)
        assert g == round_half_away(Fraction(x, 1 << exponent)), (x, exponent)


def test_rounding_divide_by_pot_ties_away_from_zero() -> None:
    assert q.rounding_divide_by_pot(np.array([1, -1, 3, -3, 5, -5]), 1).tolist() == [1, -1, 2, -2, 3, -3]
    assert q.rounding_divide_by_pot(np.array([2, -2, 6, -6]), 2).tolist() == [1, -1, 2, -2]
    assert q.rounding_divide_by_pot(np.array([MIN, MAX]), 31).tolist() == [-1, 1]


SHIFTS = [-31, -30, -20, -12, -8, -1, 0, 1, 2, 7, 20, 30]


@pytest.mark.parametrize("shift", SHIFTS)
def test_multiply_by_quantized_multiplier_double_matches_gemmlowp(shift: int) -> None:
    rng = np.random.default_rng(shift + 100)
    xs = np.concatenate([np.array(EDGE_A, dtype=np.int64), rng.integers(-(1 << 20), 1 << 20, 300)])
    ms = rng.integers(1 << 30, 1 << 31, xs.size)
    ms[:5] = [1 << 30, (1 << 31) - 1, 1 << 30, 1518500250, (1 << 30) + 1]
    got = q.multiply_by_quantized_multiplier(xs, ms, shift, "double")
    want = [t_mbqm_double(int(x), int(m), shift) for x, m in zip(xs, ms, strict=True)]
    assert got.tolist() == want


@pytest.mark.parametrize("shift", SHIFTS)
def test_multiply_by_quantized_multiplier_single_is_one_rounding(shift: int) -> None:
    rng = np.random.default_rng(shift + 200)
    xs = np.concatenate([np.array([x for x in EDGE_A if abs(x) < (1 << 24)], dtype=np.int64),
                         rng.integers(-(1 << 20), 1 << 20, 300)])
    ms = rng.integers(1 << 30, 1 << 31, xs.size)
    got = q.multiply_by_quantized_multiplier(xs, ms, shift, "single")
    for x, m, g in zip(xs.tolist(), ms.tolist(), got.tolist(), strict=True):
        assert g == t_mbqm_single(x, m, shift)
        exact = round_half_up(Fraction(x * m, 1 << (31 - shift)))
        assert g == c_int32(exact), (x, m, shift)


def test_single_and_double_differ_exactly_where_rounding_twice_matters() -> None:
    # x * 0.5 * 2**-1 = x / 4 with m = 2**30, shift = -1: single rounds x/4 once (ties up);
    # double computes round(x/2) (ties up), then rounds that /2 (ties away from zero).
    xs = np.arange(-12, 13)
    single = q.multiply_by_quantized_multiplier(xs, 1 << 30, -1, "single")
    double = q.multiply_by_quantized_multiplier(xs, 1 << 30, -1, "double")
    assert single.tolist() == [round_half_up(Fraction(int(x), 4)) for x in xs]
    assert double.tolist() == [round_half_away(Fraction(round_half_up(Fraction(int(x), 2)), 2)) for x in xs]
    # x = 1: single 1/4 -> 0; double round(1/2) = 1 then 1/2 -> 1. x = -2: -1/2 -> 0 vs -1 -> -1.
    assert (single[xs == 1][0], double[xs == 1][0]) == (0, 1)
    assert (single[xs == -2][0], double[xs == -2][0]) == (0, -1)


def test_double_rounding_saturates_and_wraps_like_c() -> None:
    # left shift overflow wraps in int32 before the high multiply (C behaviour of x * (1 << left))
    assert q.multiply_by_quantized_multiplier(1 << 30, 1 << 30, 2, "double") == t_mbqm_double(1 << 30, 1 << 30, 2)
    assert q.multiply_by_quantized_multiplier(MIN, MIN, 0, "double") == MAX


# --- QuantizeMultiplier ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("real", "single", "double"), [
    (0.0, (0, 0), (0, 0)),
    (0.5, (1 << 30, 0), (1 << 30, 0)),
    (1.0, (1 << 30, 1), (1 << 30, 1)),
    (0.75, (1610612736, 0), (1610612736, 0)),
    (1 - 2.0 ** -33, (1 << 30, 1), (1 << 30, 1)),    # q * 2**31 rounds up to 2**31: halved, shift + 1
    (2.0 ** -40, (0, 0), (0, 0)),                    # shift below -31 flushes to zero
    (2.0 ** -31, (1 << 30, -30), (1 << 30, -30)),
    (2.0 ** 31, (MAX, 30), (1 << 30, 32)),           # single rounding cannot shift by more than 30
])
def test_quantize_multiplier(real: float, single: tuple[int, int], double: tuple[int, int]) -> None:
    assert q.quantize_multiplier(real, "single") == single
    assert q.quantize_multiplier(real, "double") == double


def test_quantize_multiplier_rounds_half_away_and_approximates() -> None:
    rng = np.random.default_rng(7)
    for real in rng.uniform(1e-6, 100, 200):
        m, s = q.quantize_multiplier(float(real))
        assert (1 << 30) <= m <= MAX
        frac, exp = math.frexp(float(real))
        assert s == exp and m == math.floor(frac * 2**31 + 0.5)
        assert abs(m * 2.0 ** (s - 31) - real) <= real * 2.0 ** -31


def test_quantize_multiplier_rejects_bad_scales() -> None:
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="non-negative"):
            q.quantize_multiplier(bad)
    with pytest.raises(ValueError, match="rounding"):
        q.quantize_multiplier(0.5, "nearest")


# --- gemmlowp fixed-point functions ------------------------------------------------------------------------
def test_exp_on_negative_values_accuracy_and_exact_points() -> None:
    for bits in (4, 5):
        a = np.unique(np.concatenate([-np.arange(0, 1 << 31, 7919 * 1021, dtype=np.int64),
                                      -(np.arange(0, 1 << bits) << (31 - bits)), [-(1 << 31) + 1]]))
        got = q.exp_on_negative_values(a, bits) / 2.0**31
        want = np.exp(a / 2.0 ** (31 - bits))
        assert np.max(np.abs(got - want)) < 2e-7
        assert q.exp_on_negative_values(np.array([0]), bits)[0] == MAX  # exp(0) = 1 saturates to MAX


def test_logistic_and_tanh_accuracy() -> None:
    a = np.arange(-(1 << 31) + 1, 1 << 31, 9973 * 4099, dtype=np.int64)
    x = a / 2.0**27  # Q4.27
    assert np.max(np.abs(q.logistic(a, 4) / 2.0**31 - 1 / (1 + np.exp(-x)))) < 2e-7
    assert np.max(np.abs(q.tanh(a, 4) / 2.0**31 - np.tanh(x))) < 4e-7
    assert q.logistic(np.array([0]), 4)[0] == 1 << 30 and q.tanh(np.array([0]), 4)[0] == 0


def test_reciprocal() -> None:
    a = np.arange(0, 1 << 31, 7 * 1021 * 1031, dtype=np.int64)
    r = q.one_over_one_plus_x_for_x_in_0_1(a) / 2.0**31
    assert np.max(np.abs(r - 1 / (1 + a / 2.0**31))) < 2e-9 * 100
    m = q.one_minus_x_over_one_plus_x_for_x_in_0_1(a) / 2.0**31
    assert np.max(np.abs(m - (1 - a / 2.0**31) / (1 + a / 2.0**31))) < 2e-7
    sums = np.array([1 << 19, 3 << 19, 12345678, MAX])  # Q12.19
    recip, bits = q.get_reciprocal(sums, 12)
    for s, r_, b in zip(sums.tolist(), recip.tolist(), bits.tolist(), strict=True):
        # 1/x = r * 2**-(31 + b) relative to the Q12.19 raw scale
        assert abs((r_ / 2.0**31) * 2.0 ** -b - 1 / (s / 2.0**19)) < 1e-6 * (2.0**19 / s) + 1e-9


def test_count_leading_zeros() -> None:
    xs = [0, 1, 2, 3, 255, 1 << 15, (1 << 16) - 1, 1 << 30, MAX, MIN, -1]
    assert q.count_leading_zeros_u32(np.array(xs)).tolist() == [
        32 - (x & 0xFFFFFFFF).bit_length() for x in xs]


def test_activation_ranges() -> None:
    assert q.activation_range_quantized("none", 0.1, 3) == (-128, 127)
    assert q.activation_range_quantized("relu", 0.1, 3) == (3, 127)
    assert q.activation_range_quantized("relu6", 0.1, 3) == (3, 63)
    assert q.activation_range_quantized("relu6", 0.01, -128) == (-128, 127)  # 6/0.01 - 128 saturates
    assert q.activation_range_quantized("relu_n1_to_1", 0.01, 0) == (-100, 100)
    assert q.activation_range_quantized("relu", 0.1, -200) == (-128, 127)
    assert q.activation_range_float("relu6") == (0.0, 6.0)


def test_kernel_rounding_table() -> None:
    assert q.kernel_rounding("single", "dense") == "single"
    for op in ("conv2d", "depthwise_conv2d", "add", "sub", "mul", "mean", "matmul", "quantize", "relu", "softmax"):
        assert q.kernel_rounding("single", op) == "double"
    assert {q.kernel_rounding("double", op) for op in ("dense", "conv2d", "add")} == {"double"}
    with pytest.raises(ValueError, match="rounding"):
        q.kernel_rounding("both", "dense")
