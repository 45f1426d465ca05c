"""Pooling and mean kernels: max_pool2d, avg_pool2d, global_avg_pool2d, mean vs utvm.ir.run_reference.

Windows: VALID, SAME-like symmetric and asymmetric padding, strides, dilation, ceil_mode,
count_include_pad (with a nonzero zero point), batch > 1, fused activations; mean over every kind of
axis set, with and without keepdims. int8 bit-exact (both roundings for mean), float within 1e-5.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import (  # noqa: E402
    UBSAN,
    Batch,
    assert_cross_compiles,
    assert_integer_only,
    assert_spread,
    ops_source,
    per_tensor,
    run_batch,
)

from utvm.compiler import compile  # noqa: E402

# id, op, x shape, pool, strides, padding, dilation, ceil_mode, count_include_pad, activation
POOL_CASES = [
    ("max2x2_valid_relu", "max_pool2d", (1, 8, 6, 3), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False, False, "relu"),
    ("max3x3_same", "max_pool2d", (2, 5, 7, 4), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False, False, "none"),
    ("max3x3_s2_asym_ceil", "max_pool2d", (1, 8, 9, 2), (3, 3), (2, 2), (0, 0, 1, 1), (1, 1), True, False, "relu6"),
    ("max_dilated", "max_pool2d", (1, 9, 9, 3), (2, 3), (1, 2), (1, 2, 1, 2), (2, 2), False, False, "none"),
    ("avg2x2_valid", "avg_pool2d", (1, 8, 6, 5), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False, False, "none"),
    ("avg3x3_same_relu6", "avg_pool2d", (2, 7, 5, 4), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False, False, "relu6"),
    ("avg3x3_incl_pad", "avg_pool2d", (1, 6, 6, 3), (3, 3), (2, 1), (1, 1, 1, 1), (1, 1), False, True, "none"),
    ("avg_kws_like", "avg_pool2d", (1, 25, 5, 16), (25, 5), (2, 2), (0, 0, 0, 0), (1, 1), False, False, "none"),
    ("avg_ceil_incl", "avg_pool2d", (1, 7, 8, 2), (2, 3), (2, 2), (0, 1, 0, 1), (1, 1), True, True, "relu"),
    ("avg_dilated_asym", "avg_pool2d", (1, 9, 10, 3), (3, 2), (2, 3), (2, 0, 1, 1), (2, 3), False, False,
     "relu_n1_to_1"),
]

# id, x shape, axes, keepdims
MEAN_CASES = [
    ("hw_keep", (1, 5, 4, 6), (1, 2), True),
    ("last", (2, 3, 7), (2,), False),
    ("last_neg", (3, 10), (-1,), True),
    ("first_and_third", (4, 3, 5, 2), (0, 2), False),
    ("all", (2, 3, 4), (0, 1, 2), False),
    ("middle", (2, 9, 3), (1,), False),
    ("size1_axis", (2, 1, 5), (1,), False),
]


def _pool_batch(dtype: str, rng: np.random.Generator) -> Batch:
    b = Batch()
    for cid, op, xs, pool, strides, pad, dil, ceil, incl, act in POOL_CASES:
        name = f"{cid}_{dtype}"
        q = per_tensor(0.05, int(rng.integers(-30, 31))) if dtype == "int8" else None
        x = b.input(f"{name}_x", xs, dtype, q)
        attrs = {"pool": pool, "strides": strides, "padding": pad, "dilation": dil, "ceil_mode": ceil,
                 "count_include_pad": incl, "activation": act}
        b.apply(op, [x], f"{name}_y", attrs, q)
    for k, xs in enumerate([(1, 5, 5, 8), (2, 3, 4, 3)]):
        q = per_tensor(0.1, -5) if dtype == "int8" else None
        x = b.input(f"gap{k}_{dtype}_x", xs, dtype, q)
        b.apply("global_avg_pool2d", [x], f"gap{k}_{dtype}_y", {}, per_tensor(0.03, 7) if dtype == "int8" else None)
    for cid, xs, axes, keep in MEAN_CASES:
        name = f"mean_{cid}_{dtype}"
        x = b.input(f"{name}_x", xs, dtype, per_tensor(0.1, 3) if dtype == "int8" else None)
        b.apply("mean", [x], f"{name}_y", {"axes": axes, "keepdims": keep},
                per_tensor(0.02, -4) if dtype == "int8" else None)
    return b


@pytest.mark.parametrize("rounding", ["single", "double"])
def test_int8_pools_and_means_bit_exact(rounding: str) -> None:
    rng = np.random.default_rng(21)
    b = _pool_batch("int8", rng)
    assert_spread(b, np.random.default_rng(2), rounding)
    builds = (("packed", "-O2"), ("c", "-O0")) if rounding == "single" else (("unpacked", "-O2", UBSAN),)
    compiled = run_batch(b, rng, rounding=rounding, builds=builds, n_sets=3)
    assert_integer_only(compiled[0])
    assert_cross_compiles(compiled[0], "cortex-m4")


def test_float_pools_and_means() -> None:
    rng = np.random.default_rng(22)
    compiled = run_batch(_pool_batch("float32", rng), rng, builds=(("packed", "-O2"), ("unpacked", "-O0")), n_sets=3)
    assert_cross_compiles(compiled[0], "cortex-m3")  # soft-float


def test_int8_avg_pool_rounds_half_away_from_zero_at_exact_halves() -> None:
    """Sums that are exact halves of the count, both signs: (s +- n/2) / n must round away from zero."""
    b = Batch()
    x = b.input("x", (1, 2, 2, 4), "int8", per_tensor(0.1, 0))
    b.apply("avg_pool2d", [x], "y", {"pool": (2, 2), "strides": (2, 2), "padding": (0, 0, 0, 0),
                                     "dilation": (1, 1), "ceil_mode": False, "count_include_pad": False,
                                     "activation": "none"}, per_tensor(0.1, 0))
    c = compile(b.graph(), passes=False, unpacked_api=True)
    from utvm.compiler.local import LocalModel

    # channel sums 2, -2, 6, -6 over 4 taps: 0.5 -> 1, -0.5 -> -1, 1.5 -> 2, -1.5 -> -2
    data = np.array([[1, -1, 3, -3], [1, -1, 3, -3], [0, 0, 0, 0], [0, 0, 0, 0]], np.int8).reshape(1, 2, 2, 4)
    (y,) = LocalModel(c).run([data])
    np.testing.assert_array_equal(y.ravel(), [1, -1, 2, -2])


def test_interior_windows_divide_by_a_constant() -> None:
    b = Batch()
    x = b.input("x", (1, 6, 6, 2), "int8", per_tensor(0.1, 0))
    b.apply("avg_pool2d", [x], "y", {"pool": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1),
                                     "dilation": (1, 1), "ceil_mode": False, "count_include_pad": False,
                                     "activation": "none"}, per_tensor(0.1, 0))
    src = ops_source(compile(b.graph(), passes=False))
    assert "if (n == 9) {" in src and "(s + 9 / 2) / 9" in src
