"""quantize / requantize / dequantize kernels vs utvm.ir.run_reference: all bit-exact (float -> int8 rounds
the reference's way without libm; int8 -> int8 and dequantize are tables of the reference itself)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import UBSAN, Batch, assert_cross_compiles, assert_integer_only, per_tensor, run_batch  # noqa: E402

from utvm.compiler import compile  # noqa: E402
from utvm.compiler.local import LocalModel  # noqa: E402
from utvm.ir import run_reference  # noqa: E402
from utvm.ir.graph import Quantization  # noqa: E402


def _batch() -> Batch:
    b = Batch()
    # float -> int8, inputs well beyond the int8 range to exercise saturation
    for k, (s, zp) in enumerate([(0.05, 0), (0.1, -17), (0.0123, 100), (1.0, -128), (0.3, 127)]):
        x = b.input(f"q{k}_x", (3, 41), "float32", value_range=(-200 * s, 200 * s))
        b.apply("quantize", [x], f"q{k}_y", {}, per_tensor(s, zp))
    # int8 -> int8 requantize: scale up, down, equal with a zero-point shift
    for k, ((si, zi), (so, zo)) in enumerate([((0.05, 3), (0.1, -5)), ((0.1, -20), (0.03, 7)),
                                              ((0.02, 0), (0.02, 9)), ((0.5, 100), (0.003, -128))]):
        x = b.input(f"rq{k}_x", (2, 50), "int8", per_tensor(si, zi))
        b.apply("quantize", [x], f"rq{k}_y", {}, per_tensor(so, zo))
    # int8 -> float32 dequantize
    for k, (s, zp) in enumerate([(0.05, 0), (0.0071, -33), (3.0, 127)]):
        x = b.input(f"dq{k}_x", (4, 30), "int8", per_tensor(s, zp))
        b.apply("dequantize", [x], f"dq{k}_y", {})
    x = b.input("dqc_x", (2, 3, 4), "int8", Quantization((0.1, 0.02, 0.5), (4, -9, 0), 1))
    b.apply("dequantize", [x], "dqc_y", {})
    return b


@pytest.mark.parametrize("rounding", ["single", "double"])
def test_quantize_requantize_dequantize_exact(rounding: str) -> None:
    rng = np.random.default_rng(61)
    builds = (("packed", "-O2"), ("c", "-O0")) if rounding == "single" else (("unpacked", "-O2", UBSAN),)
    compiled = run_batch(_batch(), rng, rounding=rounding, builds=builds, n_sets=3, rtol=0.0)
    assert_cross_compiles(compiled[0], "cortex-m3")  # soft-float


def test_float_to_int8_rounds_exact_halves_away_from_zero_and_saturates() -> None:
    b = Batch()
    x = b.input("x", (12,), "float32")
    b.apply("quantize", [x], "y", {}, per_tensor(0.5, 3))
    c = compile(b.graph(), passes=False, unpacked_api=True)
    data = np.array([0.25, -0.25, 0.75, -0.75, 1.25, -1.25, 0.0, -0.0, 1e9, -1e9, 63.0, -65.5], np.float32)
    (y,) = LocalModel(c).run([data])
    np.testing.assert_array_equal(y, [4, 2, 5, 1, 6, 0, 3, 3, 127, -128, 127, -128])
    np.testing.assert_array_equal(y, run_reference(b.graph(), {"x": data})["y"])


def test_requantize_and_dequantize_use_no_floating_point_arithmetic() -> None:
    b = Batch()
    x = b.input("x", (8,), "int8", per_tensor(0.05, 3))
    b.apply("quantize", [x], "y", {}, per_tensor(0.1, -5))
    assert_integer_only(compile(b.graph(), passes=False))
