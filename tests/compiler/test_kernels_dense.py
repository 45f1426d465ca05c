"""int8 dense kernel vs utvm.ir.run_reference (bit-exact): the weight-sum fast path (constant weights and
bias: acc = sum x * w + acc_init) for lengths that are fully unrolled, unrolled with and without a remainder,
with and without bias, extreme input zero points, and the generic loop for run-time weights."""

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
    per_channel,
    per_tensor,
    run_batch,
)

# id, batch, k, units, input zero point, bias, per-channel weights, activation, constant weights
CASES = [
    ("k5", 3, 5, 4, -3, True, False, "none", True),
    ("k16", 2, 16, 7, 127, False, True, "relu", True),
    ("k17", 1, 17, 3, -128, True, True, "relu6", True),
    ("k64", 2, 64, 12, 10, True, False, "none", True),
    ("k77", 4, 77, 5, -50, True, True, "none", True),
    ("runtime_w", 2, 19, 6, 4, True, False, "none", False),
]


def _batch(rng: np.random.Generator) -> Batch:
    b = Batch()
    for cid, batch, k, units, zp, bias, pc, act, const_w in CASES:
        x = b.input(f"{cid}_x", (batch, k), "int8", per_tensor(0.05, zp))
        ws = [float(s) for s in rng.uniform(0.002, 0.02, size=units if pc else 1)]
        wq = per_channel(ws, 0) if pc else per_tensor(ws[0], 0)
        data = rng.integers(-127, 128, size=(units, k)).astype(np.int8)
        w = b.const(f"{cid}_w", data, wq) if const_w else b.input(f"{cid}_w", (units, k), "int8", wq)
        ins = [x, w]
        if bias:
            ins.append(b.const(f"{cid}_b", rng.integers(-5000, 5000, size=units).astype(np.int32)))
        s_out = 0.05 * float(np.mean(ws)) * 74 * 74 * np.sqrt(k) / 30
        b.apply("dense", ins, f"{cid}_y", {"activation": act}, per_tensor(s_out, int(rng.integers(-10, 10))))
    return b


@pytest.mark.parametrize("rounding", ["single", "double"])
def test_int8_dense_bit_exact(rounding: str) -> None:
    rng = np.random.default_rng(81)
    b = _batch(rng)
    assert_spread(b, np.random.default_rng(2), rounding, min_distinct=4)
    builds = (("packed", "-O2"), ("c", "-O0")) if rounding == "single" else (("unpacked", "-O2", UBSAN),)
    compiled = run_batch(b, rng, rounding=rounding, builds=builds, n_sets=3)
    assert_integer_only(compiled[0])
    assert_cross_compiles(compiled[0], "cortex-m4")
    src = ops_source(compiled[0])
    assert src.count("_acc_init[o]") == sum(1 for c in CASES if c[-1])  # every constant-weight case folds
