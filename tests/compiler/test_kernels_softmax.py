"""softmax kernel vs utvm.ir.run_reference: int8 bit-exact (TFLite's fixed-point path, both roundings),
float within 1e-5. Rows along the last and inner axes, several input scales and betas, rows long enough
that the final shift exceeds 31 bits and that the int32 sum wraps, constant rows and saturated rows."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import UBSAN, Batch, assert_cross_compiles, assert_integer_only, ops_source, per_tensor, run_batch  # noqa: E402

from utvm.compiler import compile  # noqa: E402

OUT_Q = per_tensor(1.0 / 256, -128)

# id, shape, axis, beta, input scale, input zero point, value range
CASES = [
    ("kws_like", (1, 12), -1, 1.0, 0.1, 10, (-128, 127)),
    ("rows", (4, 10), 1, 1.0, 0.05, -3, (-128, 127)),
    ("big_scale", (3, 7), -1, 1.0, 0.5, 0, (-128, 127)),
    ("small_scale_beta", (2, 16), -1, 0.7, 0.004, 5, (-128, 127)),
    ("inner_axis", (2, 5, 3), 1, 1.0, 0.08, -20, (-128, 127)),
    ("first_axis", (6, 4), 0, 2.0, 0.03, 1, (-128, 127)),
    ("constant_long_row", (1, 1200), -1, 1.0, 0.1, 0, (5, 5)),  # sum 1200 * 2^19: final shift 33
    ("wrapping_sum", (1, 5000), -1, 1.0, 0.1, 0, (-7, -7)),  # 5000 * 2^19 wraps the int32 sum
    ("near_max_row", (2, 300), -1, 1.0, 0.02, 0, (120, 127)),
]


def _batch(dtype: str) -> Batch:
    b = Batch()
    for cid, shape, axis, beta, s_in, zp, rng in CASES:
        name = f"{cid}_{dtype}"
        if dtype == "int8":
            x = b.input(f"{name}_x", shape, "int8", per_tensor(s_in, zp), value_range=rng)
            b.apply("softmax", [x], f"{name}_y", {"axis": axis, "beta": beta}, OUT_Q)
        else:
            frange = (float(rng[0]) * s_in, float(rng[1]) * s_in)
            x = b.input(f"{name}_x", shape, "float32", value_range=frange)
            b.apply("softmax", [x], f"{name}_y", {"axis": axis, "beta": beta})
    return b


@pytest.mark.parametrize("rounding", ["single", "double"])
def test_int8_softmax_bit_exact(rounding: str) -> None:
    rng = np.random.default_rng(31)
    builds = (("packed", "-O2"), ("c", "-O0")) if rounding == "single" else (("unpacked", "-O2", UBSAN),)
    compiled = run_batch(_batch("int8"), rng, rounding=rounding, builds=builds, n_sets=3)
    assert_integer_only(compiled[0])
    assert_cross_compiles(compiled[0], "cortex-m4")


def test_float_softmax() -> None:
    rng = np.random.default_rng(32)
    compiled = run_batch(_batch("float32"), rng, builds=(("packed", "-O2"), ("unpacked", "-O0")), n_sets=2)
    assert "expf(" in ops_source(compiled[0])
    assert_cross_compiles(compiled[0], "cortex-m3")  # soft-float


def test_int8_softmax_tables_are_compile_time_and_rows_run_in_place() -> None:
    b = Batch()
    x = b.input("x", (2, 12), "int8", per_tensor(0.1, 0))
    b.apply("softmax", [x], "s", {"axis": -1, "beta": 1.0}, OUT_Q)
    b.apply("softmax", ["s"], "y", {"axis": -1, "beta": 1.0}, OUT_Q)
    b.outputs.remove("s")
    c = compile(b.graph(), passes=False)
    assert "exp[256]" in ops_source(c)
    assert c.plan.inplace == 1  # the second softmax overwrites its input row by row
