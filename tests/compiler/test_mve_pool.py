"""The Helium (MVE) pooling kernels (`algo = mve` of pool.py: max, average, global average): the average's
division by a multiply-high is exactly TFLite's rounding division (exhaustively, for every count up to 600 and
every sum a window of that count can reach), the space exists only on MVE vocabularies with its defaults, every
point cross-compiles warning-free for Cortex-M55, and every point is bit-exact on QEMU Cortex-M55 over windows
with strides, dilation, padding (clipped windows: run-time counts from a table), count_include_pad, whole-plane
windows, channel counts that are not a multiple of the vector (tail predication), batch 2 and every int8
activation, both roundings.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import Batch, per_tensor  # noqa: E402
from schedule_harness import run_on_platform, spaces  # noqa: E402
from test_kernels_pool_simd import add_pool  # noqa: E402
from test_mve_dw import mve_sweep  # noqa: E402

from utvm.compiler.kernels import pool  # noqa: E402


def _tflite_average(s: np.ndarray, n: int) -> np.ndarray:
    """TFLite's int8 average: (s + n/2) / n for s > 0, else (s - n/2) / n, C's truncating division."""
    half = n // 2
    num = np.where(s > 0, s + half, s - half)
    return np.sign(num) * (np.abs(num) // n)


def _mve_average(s: np.ndarray, n: int, tmax: int) -> np.ndarray:
    """The kernel's instructions on int32 lanes: t = (|s| << 8) + ((n / 2) << 8), VMULH.U32 by M, shift by k - 32,
    then the sign of s restored (XOR with s >> 31, minus it)."""
    m, k = pool.divide_magic(n, tmax)
    t = (np.abs(s).astype(np.uint64) << np.uint64(8)) + np.uint64((n // 2) << 8)
    assert int(t.max(initial=0)) < 1 << 32
    q = ((t * np.uint64(m)) >> np.uint64(32)) >> np.uint64(k - 32)
    sgn = np.where(s < 0, -1, 0)
    return (q.astype(np.int64) ^ sgn) - sgn


def test_the_multiply_high_division_is_tflites_average_for_every_reachable_sum() -> None:
    for n in [*range(1, 601), 1024, 4096, 65535, 65536]:
        tmax = 128 * n + n // 2
        if n <= 600:
            s = np.arange(-128 * n, 128 * n + 1, dtype=np.int64)
        else:  # the edges and a spread of the range
            s = np.unique(np.concatenate([np.arange(-128 * n, -128 * n + 4096), np.arange(128 * n - 4096, 128 * n + 1),
                                          np.random.default_rng(n).integers(-128 * n, 128 * n, 200000)]))
        np.testing.assert_array_equal(_mve_average(s, n, tmax), _tflite_average(s, n), err_msg=f"n = {n}")


def test_divide_magic_refuses_what_it_cannot_do_exactly() -> None:
    with pytest.raises(ValueError, match="division by 0"):
        pool.divide_magic(0, 10)
    with pytest.raises(ValueError, match="dividends up to"):
        pool.divide_magic(3, 1 << 24)


def make_batch(rng: np.random.Generator, n: int = 12) -> Batch:
    b = Batch()
    for i in range(n):
        add_pool(b, rng, i)
    q = per_tensor(0.05, int(rng.integers(-128, 128)))
    x = b.input("kws_x", (1, 25, 5, 64), "int8", q)  # KWS's whole-plane average (one constant count)
    b.apply("avg_pool2d", [x], "kws_y", {"pool": (25, 5), "strides": (2, 2), "padding": (0, 0, 0, 0),
                                         "dilation": (1, 1), "ceil_mode": False, "count_include_pad": False,
                                         "activation": "none"}, q)
    x = b.input("clip_x", (2, 7, 9, 21), "int8", q)  # clipped windows: counts looked up; 21 = 16 + 5 channels
    b.apply("avg_pool2d", [x], "clip_y", {"pool": (3, 4), "strides": (2, 1), "padding": (1, 2, 1, 1),
                                          "dilation": (1, 1), "ceil_mode": False, "count_include_pad": False,
                                          "activation": "relu6"}, q)
    b.apply("max_pool2d", [x], "max_y", {"pool": (3, 3), "strides": (1, 2), "padding": (1, 1, 1, 1),
                                         "dilation": (1, 2), "ceil_mode": False, "count_include_pad": False,
                                         "activation": "relu"}, q)
    b.apply("avg_pool2d", [x], "incl_y", {"pool": (2, 3), "strides": (1, 1), "padding": (1, 1, 1, 1),
                                          "dilation": (1, 1), "ceil_mode": False, "count_include_pad": True,
                                          "activation": "none"}, q)
    x = b.input("glob_x", (1, 8, 8, 37), "int8", q)
    b.apply("global_avg_pool2d", [x], "glob_y", {}, per_tensor(0.03, int(rng.integers(-128, 128))))
    return b


MVE_KNOBS = {"mve_cv": {1, 2}, "tap_unroll": {False, True}}


def test_defaults_on_cortex_m55_and_no_mve_elsewhere() -> None:
    b = Batch()
    x = b.input("x", (1, 25, 5, 64), "int8", per_tensor(0.05, -128))
    b.apply("avg_pool2d", [x], "y", {"pool": (25, 5), "strides": (2, 2), "padding": (0, 0, 0, 0), "dilation": (1, 1),
                                     "ceil_mode": False, "count_include_pad": False, "activation": "none"},
            per_tensor(0.05, -128))
    ((_key, m55),) = spaces(b.graph(), "cortex-m55", "double")
    assert m55.default == {"algo": "mve", "mve_cv": 2, "tap_unroll": True}
    ((_key, m4),) = spaces(b.graph(), "cortex-m4", "double")
    assert "mve" not in m4.knobs[0].values and m4.default["algo"] == "cblock"


def test_legality_names_what_it_refuses() -> None:
    b = Batch()
    x = b.input("x", (1, 6, 6, 4), "int8", per_tensor(0.05, 3))
    b.apply("avg_pool2d", [x], "y", {"pool": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1), "dilation": (1, 1),
                                     "ceil_mode": False, "count_include_pad": False, "activation": "none"},
            per_tensor(0.05, 3))
    ((_key, space),) = spaces(b.graph(), "cortex-m55", "double")
    assert "the 4 channels fill one vector" in str(space.check({"algo": "mve", "mve_cv": 2, "tap_unroll": False}))
    assert "clipped in x" in str(space.check({"algo": "mve", "mve_cv": 1, "tap_unroll": True}))
    assert space.check({"algo": "mve", "mve_cv": 1, "tap_unroll": False}) is None


def test_every_mve_point_cross_compiles_warning_free() -> None:
    mve_sweep(lambda rng: make_batch(rng, 8), 81, ("double", "single", "double"), MVE_KNOBS, None)


@pytest.mark.slow
def test_every_mve_point_is_bit_exact_on_qemu_m55() -> None:
    mve_sweep(lambda rng: make_batch(rng, 14), 20261202, ("double", "single", "double"), MVE_KNOBS,
              run_on_platform("qemu-cortex-m55"))
