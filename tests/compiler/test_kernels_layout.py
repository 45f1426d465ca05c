"""Data-movement kernels vs utvm.ir.run_reference: pad (any rank, int8 / float32 / int32), transpose
(permutations with size-1 and mergeable axes), concat (every axis, constant inputs, 2-4 inputs)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import Batch, assert_cross_compiles, assert_integer_only, ops_source, per_tensor, run_batch  # noqa: E402

from utvm.compiler import compile  # noqa: E402
from utvm.compiler.kernels.layout import simplify_transpose  # noqa: E402

PAD_CASES = [
    ("nhwc_spatial", (1, 5, 4, 3), ((0, 0), (1, 2), (2, 1), (0, 0))),
    ("channels", (2, 3, 4), ((0, 0), (0, 0), (3, 1))),
    ("all_axes", (2, 3, 2), ((1, 1), (2, 0), (0, 3))),
    ("leading_only", (3, 4), ((2, 1), (0, 0))),
    ("none", (2, 5), ((0, 0), (0, 0))),
    ("rank1", (7,), ((4, 2),)),
]
TRANSPOSE_CASES = [
    ("nhwc_to_nchw", (2, 3, 4, 5), (0, 3, 1, 2)),
    ("nchw_to_nhwc", (1, 5, 3, 4), (0, 2, 3, 1)),
    ("reverse", (2, 3, 4), (2, 1, 0)),
    ("identity", (3, 4), (0, 1)),
    ("with_ones", (1, 6, 1, 2), (3, 2, 1, 0)),
    ("swap_last", (2, 2, 7), (0, 2, 1)),
]
CONCAT_CASES = [
    ("axis_last", [(1, 2, 3), (1, 2, 5)], 2),
    ("axis0", [(2, 3), (4, 3), (1, 3)], 0),
    ("axis_mid", [(2, 1, 4), (2, 3, 4), (2, 2, 4), (2, 1, 4)], 1),
    ("neg_axis", [(3, 2), (3, 6)], -1),
]


def _batch(dtype: str, rng: np.random.Generator) -> Batch:
    b = Batch()
    q = per_tensor(0.1, -3) if dtype == "int8" else None
    for cid, shape, pads in PAD_CASES:
        x = b.input(f"pad_{cid}_{dtype}_x", shape, dtype, q)
        value = -3 if dtype == "int8" else (7 if dtype == "int32" else 0.5)
        b.apply("pad", [x], f"pad_{cid}_{dtype}_y", {"pads": pads, "value": value}, q)
    for cid, shape, perm in TRANSPOSE_CASES:
        x = b.input(f"tr_{cid}_{dtype}_x", shape, dtype, q)
        b.apply("transpose", [x], f"tr_{cid}_{dtype}_y", {"perm": perm}, q)
    for cid, shapes, axis in CONCAT_CASES:
        ins = []
        for k, shape in enumerate(shapes):
            if k == 1:  # one constant input per case
                data = rng.integers(-50, 50, size=shape).astype(dtype)
                ins.append(b.const(f"cat_{cid}_{dtype}_c{k}", data, q))
            else:
                ins.append(b.input(f"cat_{cid}_{dtype}_x{k}", shape, dtype, q))
        b.apply("concat", ins, f"cat_{cid}_{dtype}_y", {"axis": axis}, q)
    return b


def test_int8_data_movement_bit_exact() -> None:
    rng = np.random.default_rng(51)
    compiled = run_batch(_batch("int8", rng), rng, builds=(("packed", "-O2"), ("c", "-O0")))
    assert_integer_only(compiled[0])
    assert_cross_compiles(compiled[0], "cortex-m4")


def test_float_and_int32_data_movement_exact() -> None:
    rng = np.random.default_rng(52)
    b = _batch("float32", rng)
    b2 = _batch("int32", rng)
    b.tensors.update(b2.tensors)
    b.nodes += b2.nodes
    b.inputs += b2.inputs
    b.outputs += b2.outputs
    run_batch(b, rng, builds=(("unpacked", "-O2"),), rtol=0.0)


def test_transpose_merges_adjacent_axes_and_drops_size_one_axes() -> None:
    # NHWC -> NCHW on [2, 3, 4, 5]: batch, then C, then H*W merged (stride 5)
    assert simplify_transpose((2, 3, 4, 5), (0, 3, 1, 2)) == [(2, 60), (5, 1), (12, 5)]
    assert simplify_transpose((3, 4), (0, 1)) == [(12, 1)]
    assert simplify_transpose((1, 6, 1, 2), (3, 2, 1, 0)) == [(2, 1), (6, 2)]
    assert simplify_transpose((1, 1), (1, 0)) == [(1, 0)]


def test_pad_copies_whole_rows() -> None:
    b = Batch()
    x = b.input("x", (1, 5, 4, 3), "int8", per_tensor(0.1, 0))
    b.apply("pad", [x], "y", {"pads": ((0, 0), (1, 1), (1, 1), (0, 0)), "value": 0}, per_tensor(0.1, 0))
    src = ops_source(compile(b.graph(), passes=False))
    assert "e < 12; ++e" in src  # one W*C row of the input per copy loop
