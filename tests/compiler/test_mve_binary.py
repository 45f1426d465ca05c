"""The Helium (MVE) int8 add/sub/mul kernel (`algo = mve` of binary.py): its space exists only on MVE
vocabularies (inputs of the output's shape, or one element against it; other broadcasts keep the scalar
kernels), its defaults, every point cross-compiles warning-free for Cortex-M55, and every point is bit-exact on
QEMU Cortex-M55: random shapes (tails of 1-3 elements), zero points over the whole int8 range, every int8
activation, both roundings, both input forms (gathered tables, vector rescale), and exhaustively every pair of
int8 inputs through both forms.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import Batch, compare, ops_source, per_tensor  # noqa: E402
from schedule_harness import run_on_platform, spaces  # noqa: E402
from test_kernels_elementwise_tables import EXHAUSTIVE, add_binary, binary_quants  # noqa: E402
from test_mve_dw import mve_sweep  # noqa: E402

from utvm.compiler import compile  # noqa: E402
from utvm.ir import run_reference  # noqa: E402

ACTS = ("none", "relu", "relu6", "relu_n1_to_1")


def add_flat(b: Batch, rng: np.random.Generator, i: int) -> None:
    """An add/sub/mul whose inputs have the output's shape, or one of them a single (run-time) element."""
    op = str(rng.choice(["add", "sub", "mul"]))
    shape = [int(rng.integers(1, 6)) for _ in range(int(rng.integers(1, 4)))] + [int(rng.integers(1, 19))]
    sa, sb = shape, shape if rng.random() < 0.75 else [1]
    if rng.random() < 0.5:
        sa, sb = sb, sa
    qa, qb, qy = binary_quants(rng, op)
    a = b.input(f"f{i}_a", sa, "int8", qa)
    bb = b.input(f"f{i}_b", sb, "int8", qb)
    b.apply(op, [a, bb], f"f{i}_y", {"activation": str(rng.choice(ACTS))}, qy)


def make_batch(rng: np.random.Generator, n: int = 12) -> Batch:
    b = Batch()
    for i in range(n):
        add_flat(b, rng, i)
    for i in range(n // 3):  # broadcasts: the other kernels, beside
        add_binary(b, rng, 100 + i)
    return b


MVE_KNOBS = {"mve_in": {"table", "arith"}, "mve_unroll": {1, 2, 4}}


def test_defaults_on_cortex_m55_and_no_mve_elsewhere() -> None:
    b = Batch()
    x = b.input("x", (4, 8, 8), "int8", per_tensor(0.05, -3))
    y = b.input("y", (4, 8, 8), "int8", per_tensor(0.06, 7))
    b.apply("add", [x, y], "s", {"activation": "relu"}, per_tensor(0.08, -128))
    b.apply("mul", [x, y], "p", {"activation": "none"}, per_tensor(0.1, 2))
    z = b.input("z", (4, 1, 8), "int8", per_tensor(0.06, 7))
    b.apply("sub", [x, z], "d", {"activation": "none"}, per_tensor(0.1, 2))
    (_, add), (_, mul), (_, sub) = spaces(b.graph(), "cortex-m55", "double")
    assert add.default == {"algo": "mve", "mve_in": "table", "mve_unroll": 2}
    assert mul.default == {"algo": "mve", "mve_in": "arith", "mve_unroll": 2}
    assert "mul's inputs need no rescale" in str(mul.check({"algo": "mve", "mve_in": "table", "mve_unroll": 1}))
    assert sub.default["algo"] == "table"  # a row broadcast: the table kernel
    assert "inputs that broadcast" in str(sub.check({"algo": "mve", "mve_in": "table", "mve_unroll": 1}))
    (_, add_m4), _, _ = spaces(b.graph(), "cortex-m4", "double")
    assert "mve" not in add_m4.knobs[0].values and add_m4.default == {"algo": "table", "requant": "dbl", "unroll": 4}


def test_every_mve_point_cross_compiles_warning_free() -> None:
    mve_sweep(lambda rng: make_batch(rng, 9), 91, ("double", "single", "double"), MVE_KNOBS, None)


@pytest.mark.slow
def test_every_mve_point_is_bit_exact_on_qemu_m55() -> None:
    mve_sweep(lambda rng: make_batch(rng, 15), 20261203, ("double", "single", "double", "single"), MVE_KNOBS,
              run_on_platform("qemu-cortex-m55"))


@pytest.mark.slow
@pytest.mark.parametrize("form", ["table", "arith"])
def test_every_input_pair_through_the_vectors_on_the_m55(form: str) -> None:
    """y[i, j] = a[i] op b[j] for all 256 x 256 int8 pairs, both roundings: the operands are sent as a column
    and a row (512 bytes) and made whole 256 x 256 tensors on the device (`broadcast_to`), so the add/sub/mul
    sees two inputs of the output's shape (its vector path) and the link carries only the outputs."""
    values = np.arange(-128, 128, dtype=np.int8)
    for rounding in ("double", "single"):
        b = Batch()
        for k, (op, qa, qb, qy, act) in enumerate(EXHAUSTIVE):
            a = b.input(f"x{k}_a", (256, 1), "int8", per_tensor(*qa))
            bb = b.input(f"x{k}_b", (1, 256), "int8", per_tensor(*qb))
            wa = b.tensor(f"x{k}_wa", (256, 256), "int8", per_tensor(*qa))
            wb = b.tensor(f"x{k}_wb", (256, 256), "int8", per_tensor(*qb))
            b.op("broadcast_to", [a], wa, {"shape": [256, 256]}, is_output=False)
            b.op("broadcast_to", [bb], wb, {"shape": [256, 256]}, is_output=False)
            b.apply(op, [wa, wb], f"x{k}_y", {"activation": act}, per_tensor(*qy))
        graph = b.graph()
        schedules = {}
        for key, space in spaces(graph, "cortex-m55", rounding):
            if not key.startswith(("add:", "sub:", "mul:")):
                continue
            point = {"algo": "mve", "mve_in": form, "mve_unroll": 2}
            if space.check(point) is not None:  # mul has only the arith form
                point = {**point, "mve_in": "arith"}
            assert space.check(point) is None, (key, space.check(point))
            schedules[key] = point
        compiled = compile(graph, passes=False, rounding=rounding, target="cortex-m55", schedules=schedules,
                           unpacked_api=False)
        binary = [o for o in compiled.operators if o.op in ("add", "sub", "mul")]
        assert len(binary) == len(EXHAUSTIVE) and all(o.schedule.get("algo") == "mve" for o in binary)
        assert ("vldrwq_gather_shifted_offset_s32" in ops_source(compiled)) == (form == "table")
        inputs = {n: (values.reshape(256, 1) if n.endswith("_a") else values.reshape(1, 256)) for n in graph.inputs}
        ref = run_reference(graph, inputs, rounding=rounding)
        outs = run_on_platform("qemu-cortex-m55")(compiled, [inputs[n] for n in graph.inputs])
        for name, got in zip(graph.outputs, outs, strict=True):
            compare(f"{name} [{form} {rounding}]", got, ref[name])
