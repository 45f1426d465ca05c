"""The Helium (MVE) requantization forms (requant.py, "Helium (MVE): four lanes at once") equal utvm's reference
MultiplyByQuantizedMultiplier (ops._quant) on every operand their legality allows.

Each MVE instruction the C helpers use is emulated here lane by lane from its Armv8.1-M definition (the
integer result before truncation or saturation, then truncated or saturated to 32 bits), the helpers' C is
checked to be exactly that instruction sequence, and the sequences are compared with the reference:
exhaustively over edge operands at every shift, then on millions of random ones.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from utvm.compiler.kernels import helper_source
from utvm.compiler.kernels.requant import mve_reason
from utvm.ops import _quant

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def _i64(v: np.ndarray | int) -> np.ndarray:
    return np.asarray(v, np.int64)


def _sat32(v: np.ndarray) -> np.ndarray:
    return np.clip(v, I32_MIN, I32_MAX)


def _wrap32(v: np.ndarray) -> np.ndarray:
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


# --- the instructions (int64 arrays holding int32 lanes) ---------------------------------------------------------
def vqrdmulh(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """VQRDMULH.S32: sat32((2ab + 2^31) >> 32) (computed as (ab + 2^30) >> 31: 2ab could overflow int64)."""
    return _sat32((_i64(a) * _i64(b) + (1 << 30)) >> 31)


def vqdmulh(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """VQDMULH.S32: sat32(2ab >> 32)."""
    return _sat32((_i64(a) * _i64(b)) >> 31)


def _shift_count(s: np.ndarray) -> np.ndarray:
    """The signed count VSHL/VRSHL take from the bottom byte of each lane of the shift vector."""
    return ((_i64(s) & 0xFF) ^ 0x80) - 0x80


def vrshl(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """VRSHL.S32 (register): a negative count n rounds: (x + 2^(n-1)) >> n in unbounded integers; a positive
    count shifts left, truncated to 32 bits."""
    x, n = _i64(x), _shift_count(s)
    right = -np.minimum(n, 0)
    rounded = (x + np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), 0)) >> right
    left = _wrap32(x << np.clip(n, 0, 63))
    return np.where(n >= 0, left, rounded)


def vshl(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    """VSHL.S32 (register): left truncated to 32 bits, or an arithmetic right shift for a negative count."""
    x, n = _i64(x), _shift_count(s)
    return np.where(n >= 0, _wrap32(x << np.clip(n, 0, 63)), x >> np.clip(-n, 0, 63))


def vneg(x: np.ndarray) -> np.ndarray:
    return _wrap32(-_i64(x))


def vand(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _i64(a) & _i64(b)  # sign-extended int32 in int64: the AND of the 32-bit patterns, sign-extended


def vshr31(x: np.ndarray) -> np.ndarray:
    return _i64(x) >> 31


def vqadd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _sat32(_i64(a) + _i64(b))


# --- the helpers as instruction sequences ------------------------------------------------------------------------
def mve_double(acc: np.ndarray, m: np.ndarray, ls: np.ndarray, rs: np.ndarray) -> np.ndarray:
    neg_right = vneg(rs)
    h = vqrdmulh(vshl(acc, ls), m)
    fixup = vshr31(vand(h, neg_right))
    return vrshl(vqadd(h, fixup), neg_right)


def mve_single(acc: np.ndarray, m: np.ndarray, ls: np.ndarray, rs: np.ndarray) -> np.ndarray:
    shifted = vrshl(vqdmulh(acc, m), vneg(rs))
    unshifted = vqrdmulh(vshl(acc, ls), m)
    return np.where(_i64(rs) == 0, unshifted, shifted)  # VPSEL on VCMP.I32 eq, #0


def mve_right_double(acc: np.ndarray, m: np.ndarray, shift: np.ndarray) -> np.ndarray:
    h = vqrdmulh(acc, m)
    return vrshl(vqadd(h, vshr31(h)), shift)


def mve_right_single(acc: np.ndarray, m: np.ndarray, shift: np.ndarray) -> np.ndarray:
    return vrshl(vqdmulh(acc, m), shift)


#: the intrinsics each helper's C calls, in order of appearance (the emulations above follow them)
SEQUENCES = {
    "mve_requant:double": ["vnegq_s32", "vqrdmulhq_s32", "vshlq_s32", "vshrq_n_s32", "vandq_s32", "vrshlq_s32",
                           "vqaddq_s32"],
    "mve_requant:single": ["vrshlq_s32", "vqdmulhq_s32", "vnegq_s32", "vqrdmulhq_s32", "vshlq_s32", "vpselq_s32",
                           "vcmpeqq_n_s32"],
    "mve_requant_right:double": ["vqrdmulhq_s32", "vrshlq_s32", "vqaddq_s32", "vshrq_n_s32"],
    "mve_requant_right:single": ["vrshlq_s32", "vqdmulhq_s32"],
}


@pytest.mark.parametrize("key", sorted(SEQUENCES))
def test_the_helpers_c_is_the_emulated_sequence(key: str) -> None:
    body = re.sub(r"/\*.*?\*/", "", helper_source(key), flags=re.S)
    assert re.findall(r"\b(v[a-z0-9_]+)\(", body) == SEQUENCES[key], body
    # the sign as 0 / -1: VSHR #31 of its operand
    assert all(call.endswith(", 31)") for call in re.findall(r"vshrq_n_s32\([^;]*?31\)", body))
    assert body.count("vshrq_n_s32(") == len(re.findall(r"vshrq_n_s32\((?:[^()]|\([^()]*\))*, 31\)", body))


# --- operands ----------------------------------------------------------------------------------------------------
def _edge_accs() -> np.ndarray:
    vals = {0, 1, -1, 2, -2, 3, -3, I32_MIN, I32_MIN + 1, I32_MAX, I32_MAX - 1, 12345, -12345}
    for k in range(1, 31):
        for d in (-1, 0, 1):
            vals.update({(1 << k) + d, -(1 << k) + d, (3 << k >> 1) + d, -(3 << k >> 1) + d})
    return np.array(sorted(v for v in vals if I32_MIN <= v <= I32_MAX), np.int64)


EDGE_MULTS = np.array([0, 1, 2, 3, (1 << 30) - 1, 1 << 30, (1 << 30) + 1, 1518500250, 1 << 31 - 1 | 1, I32_MAX,
                       -1, -(1 << 30), I32_MIN + 1, I32_MIN], np.int64)


def _reference(acc: np.ndarray, m: np.ndarray, shift: np.ndarray, rounding: str) -> np.ndarray:
    return _quant.multiply_by_quantized_multiplier(acc, m, shift, rounding)


def _split(shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.maximum(shift, 0), np.maximum(-shift, 0)


def _check(acc: np.ndarray, m: np.ndarray, shift: np.ndarray, rounding: str, right_only: bool) -> None:
    want = _reference(acc, m, shift, rounding)
    if right_only:
        got = (mve_right_double if rounding == "double" else mve_right_single)(acc, m, shift)
    else:
        ls, rs = _split(shift)
        got = (mve_double if rounding == "double" else mve_single)(acc, m, ls, rs)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{rounding} right_only={right_only}: acc {acc.flat[bad[0]]} m {m.flat[bad[0]]} "
                           f"shift {shift.flat[bad[0]]}: {got.flat[bad[0]]} != {want.flat[bad[0]]}")


def _legal_accs(accs: np.ndarray, rounding: str, shift: int) -> np.ndarray:
    """The accumulators within the largest bound mve_reason accepts for this shift."""
    if rounding == "single" and shift >= 0:
        bound = I32_MAX >> shift
        assert mve_reason(rounding, [1 << 30], [shift], bound) is None
        assert mve_reason(rounding, [1 << 30], [shift], bound + 1) is not None
        return accs[np.abs(accs) <= bound]
    assert mve_reason(rounding, [1 << 30], [shift], None) is None
    return accs


@pytest.mark.parametrize("rounding", ["double", "single"])
def test_every_edge_operand_at_every_shift(rounding: str) -> None:
    accs = _edge_accs()
    for shift in range(-31, 31):
        mults = EDGE_MULTS if rounding == "double" else EDGE_MULTS[EDGE_MULTS != I32_MIN]
        a = _legal_accs(accs, rounding, shift)
        aa, mm = np.meshgrid(a, mults)
        ss = np.full(aa.shape, shift, np.int64)
        _check(aa, mm, ss, rounding, False)
        if shift <= -1:
            _check(aa, mm, ss, rounding, True)


@pytest.mark.parametrize("rounding", ["double", "single"])
def test_millions_of_random_operands(rounding: str) -> None:
    rng = np.random.default_rng(2025 if rounding == "double" else 2026)
    for _ in range(8):
        n = 500_000
        # accumulators of every magnitude: a random bit length, then a random value of that length
        bits = rng.integers(0, 32, n)
        acc = rng.integers(0, 1 << 31, n, dtype=np.int64) >> (31 - bits)
        acc = np.where(rng.integers(0, 2, n) == 1, -acc - rng.integers(0, 2, n), acc)
        m = np.where(rng.integers(0, 8, n) == 0, rng.integers(I32_MIN + 1, 1 << 31, n, dtype=np.int64),
                     rng.integers(1 << 30, 1 << 31, n, dtype=np.int64))
        shift = rng.integers(-31, 31, n, dtype=np.int64)
        if rounding == "single":  # within the bound mve_reason requires of a left shift
            acc = np.where(shift >= 0, acc >> np.maximum(shift, 0), acc)
        _check(acc, m, shift, rounding, False)
        right = shift <= -1
        _check(acc[right], m[right], shift[right], rounding, True)


def test_a_left_shift_past_the_single_rounding_bound_would_be_wrong() -> None:
    """The single form's legality is not vacuous: beyond the bound, VQRDMULH of the wrapped acc << shift differs."""
    acc, m, shift = np.array([1 << 30]), np.array([1 << 30]), np.array([1])
    ls, rs = _split(shift)
    assert mve_single(acc, m, ls, rs)[0] != _reference(acc, m, shift, "single")[0]
    assert "does not fit int32" in (mve_reason("single", [1 << 30], [1], 1 << 30) or "")


def test_the_sign_fixup_is_needed_for_double_rounding() -> None:
    """Without the fixup VRSHL's half-up rounding differs from RoundingDivideByPOT on a negative tie."""
    acc, m, shift = np.array([-3]), np.array([I32_MAX]), np.array([-1])  # h = -3, -3 / 2 = -1.5 -> -2
    assert vrshl(vqrdmulh(acc, m), shift)[0] == -1
    assert mve_right_double(acc, m, shift)[0] == -2 == _reference(acc, m, shift, "double")[0]


def test_refusals_name_the_reason() -> None:
    assert "-1" in (mve_reason("double", [1 << 30], [0], None, right_only=True) or "")
    assert "INT32_MIN" in (mve_reason("single", [I32_MIN], [-3], 100) or "")
    assert "bound" in (mve_reason("single", [1 << 30], [0], None) or "")
    assert "[-31, 30]" in (mve_reason("double", [1 << 30], [-32], 100) or "")
    assert mve_reason("double", [I32_MIN, 1 << 30], [5, -31], None) is None
