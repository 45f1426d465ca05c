"""matmul (float32 and int8, numpy broadcasting of batch axes, rank-1 operands) and unfolded batch_norm
(constant and run-time parameters) kernels vs utvm.ir.run_reference."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import UBSAN, Batch, assert_cross_compiles, assert_integer_only, ops_source, per_tensor, run_batch  # noqa: E402

# id, a shape, b shape, b constant?
MATMUL_CASES = [
    ("plain", (3, 5), (5, 4), False),
    ("batched", (2, 3, 6), (2, 6, 2), False),
    ("broadcast_b", (2, 2, 3, 4), (4, 5), True),
    ("broadcast_both", (3, 1, 2, 4), (1, 2, 4, 3), False),
    ("vec_mat", (7,), (7, 3), True),
    ("mat_vec", (2, 4, 6), (6,), False),
]


def _matmul_batch(dtype: str, rng: np.random.Generator) -> Batch:
    b = Batch()
    for cid, a_shape, b_shape, const_b in MATMUL_CASES:
        name = f"mm_{cid}_{dtype}"
        qa = per_tensor(0.05, int(rng.integers(-20, 20))) if dtype == "int8" else None
        qb = per_tensor(0.02, int(rng.integers(-20, 20))) if dtype == "int8" else None
        a = b.input(f"{name}_a", a_shape, dtype, qa)
        if const_b:
            data = (rng.integers(-128, 128, size=b_shape).astype(np.int8) if dtype == "int8"
                    else rng.normal(size=b_shape).astype(np.float32))
            bt = b.const(f"{name}_b", data, qb)
        else:
            bt = b.input(f"{name}_b", b_shape, dtype, qb)
        k = a_shape[-1]
        s_out = 0.05 * 0.02 * 74 * 74 * np.sqrt(k) / 40  # typical |acc| lands around 40 output steps
        qy = per_tensor(s_out, int(rng.integers(-10, 10))) if dtype == "int8" else None
        b.apply("matmul", [a, bt], f"{name}_y", {}, qy)
    return b


@pytest.mark.parametrize("rounding", ["single", "double"])
def test_int8_matmul_bit_exact(rounding: str) -> None:
    rng = np.random.default_rng(71)
    builds = (("packed", "-O2"), ("c", "-O0")) if rounding == "single" else (("unpacked", "-O2", UBSAN),)
    compiled = run_batch(_matmul_batch("int8", rng), rng, rounding=rounding, builds=builds)
    assert_integer_only(compiled[0])
    assert_cross_compiles(compiled[0], "cortex-m4")


def test_float_matmul_and_batch_norm() -> None:
    rng = np.random.default_rng(72)
    b = _matmul_batch("float32", rng)
    # batch_norm with constant parameters (folded into two tables) and with run-time ones (scratch)
    c = 6
    x = b.input("bn_const_x", (2, 3, 4, c), "float32")
    params = [b.const(f"bn_const_{r}", v.astype(np.float32)) for r, v in
              [("scale", rng.normal(size=c)), ("bias", rng.normal(size=c)), ("mean", rng.normal(size=c)),
               ("var", rng.uniform(0.1, 2, size=c))]]
    b.apply("batch_norm", [x, *params], "bn_const_y", {"epsilon": 1e-3})
    x2 = b.input("bn_rt_x", (5, c), "float32")
    rt = [b.input(f"bn_rt_{r}", (c,), "float32", value_range=(0.1, 2.0)) for r in ("scale", "bias", "mean", "var")]
    b.apply("batch_norm", [x2, *rt], "bn_rt_y", {"epsilon": 1e-5})
    compiled = run_batch(b, rng, builds=(("packed", "-O2"), ("unpacked", "-O0")))
    src = ops_source(compiled[0])
    assert "sqrtf(" in src  # the run-time batch_norm computes its factors on the device
    assert_cross_compiles(compiled[0], "cortex-m3")  # soft-float


def test_batch_norm_with_constant_parameters_matches_exactly() -> None:
    """No FMA contraction under -std=c99, IEEE ops: the float result equals numpy's float32 bit for bit."""
    rng = np.random.default_rng(73)
    b = Batch()
    x = b.input("x", (4, 8), "float32")
    params = [b.const(f"p{k}", rng.uniform(0.2, 2, size=8).astype(np.float32)) for k in range(4)]
    b.apply("batch_norm", [x, *params], "y", {"epsilon": 1e-3})
    (c,) = run_batch(b, rng, builds=(("unpacked", "-O2"),), rtol=0.0)
    assert c.plan.inplace == 0 and "multiplier[8]" in ops_source(c)
