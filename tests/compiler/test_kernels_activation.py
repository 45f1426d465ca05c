"""Unary activation kernels (relu, relu6, clip, logistic, tanh) vs utvm.ir.run_reference: int8 bit-exact
(a table lookup over all 256 inputs, both roundings), float within 1e-5; in-place on a dying input."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import UBSAN, Batch, assert_cross_compiles, assert_integer_only, ops_source, per_tensor, run_batch  # noqa: E402

from utvm.compiler import compile  # noqa: E402

# id, op, attrs, shape, (in scale, in zp), (out scale, out zp)
INT8_CASES = [
    ("relu_same_q", "relu", {}, (2, 33), (0.05, -10), (0.05, -10)),
    ("relu_rescale", "relu", {}, (1, 4, 4, 3), (0.1, 5), (0.03, -128)),
    ("relu6", "relu6", {}, (50,), (0.05, 0), (6 / 255, -128)),
    ("relu6_wide_in", "relu6", {}, (3, 17), (0.2, 20), (0.02, -100)),
    ("clip", "clip", {"min": -1.5, "max": 2.25}, (64,), (0.04, 3), (0.02, 0)),
    ("clip_low_only", "clip", {"min": 0.5, "max": math.inf}, (40,), (0.05, -1), (0.05, -1)),
    ("logistic", "logistic", {}, (2, 70), (0.08, 4), (1 / 256, -128)),
    ("logistic_fine", "logistic", {}, (100,), (0.01, -50), (1 / 256, -128)),
    ("tanh", "tanh", {}, (5, 20), (0.03, -7), (1 / 128, 0)),
    ("tanh_coarse", "tanh", {}, (77,), (0.25, 0), (1 / 128, 0)),
]
FLOAT_CASES = [
    ("relu", "relu", {}, (3, 40)),
    ("relu6", "relu6", {}, (120,)),
    ("clip", "clip", {"min": -0.75, "max": 1.5}, (2, 3, 9)),
    ("clip_high_only", "clip", {"min": -math.inf, "max": 0.25}, (31,)),
    ("logistic", "logistic", {}, (4, 25)),
    ("tanh", "tanh", {}, (90,)),
]


def _int8_batch() -> Batch:
    b = Batch()
    for cid, op, attrs, shape, (si, zi), (so, zo) in INT8_CASES:
        x = b.input(f"{cid}_x", shape, "int8", per_tensor(si, zi))
        b.apply(op, [x], f"{cid}_y", attrs, per_tensor(so, zo))
    return b


@pytest.mark.parametrize("rounding", ["single", "double"])
def test_int8_activations_bit_exact(rounding: str) -> None:
    rng = np.random.default_rng(41)
    builds = (("packed", "-O2"), ("c", "-O0")) if rounding == "single" else (("unpacked", "-O2", UBSAN),)
    compiled = run_batch(_int8_batch(), rng, rounding=rounding, builds=builds, n_sets=3)
    assert_integer_only(compiled[0])
    assert_cross_compiles(compiled[0], "cortex-m4")


def test_float_activations() -> None:
    rng = np.random.default_rng(42)
    b = Batch()
    for cid, op, attrs, shape in FLOAT_CASES:
        x = b.input(f"{cid}_x", shape, "float32", value_range=(-8.0, 8.0))
        b.apply(op, [x], f"{cid}_y", attrs)
    compiled = run_batch(b, rng, builds=(("packed", "-O2"), ("unpacked", "-O0")), n_sets=2)
    src = ops_source(compiled[0])
    assert "expf(" in src and "tanhf(" in src
    assert_cross_compiles(compiled[0], "cortex-m3")  # soft-float


def test_int8_activation_is_one_table_and_runs_in_place() -> None:
    b = Batch()
    x = b.input("x", (1, 64), "int8", per_tensor(0.1, 0))
    b.apply("relu", [x], "r", {}, per_tensor(0.1, 0))
    b.apply("tanh", ["r"], "y", {}, per_tensor(1 / 128, 0))
    b.outputs.remove("r")
    c = compile(b.graph(), passes=False)
    assert ops_source(c).count("[256] = {") == 2
    assert c.plan.inplace == 1  # tanh writes over the relu output it reads
