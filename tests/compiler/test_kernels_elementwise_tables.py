"""Every point of the int8 add/sub/mul space (algo direct | table | lut, the table's requantization forms and
unrolling) is bit-exact with the reference: random shapes with broadcasting (rows, columns, scalars,
constant single values), zero points over the whole int8 range, every int8 activation, both roundings; on
the host, on QEMU Cortex-M3 (portable) and Cortex-M4 (doubled SMMULR requantization). On the M4 also
exhaustively: every pair of int8 inputs through the input tables and the asm requantization.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import Batch, assert_cross_compiles, compare, ops_source, per_tensor  # noqa: E402
from schedule_harness import assign_points, point_tests, run_on_platform, spaces  # noqa: E402

from utvm.compiler import compile  # noqa: E402
from utvm.ir import run_reference  # noqa: E402
from utvm.ir.graph import Quantization  # noqa: E402

ACTS = ("none", "relu", "relu6", "relu_n1_to_1")


def binary_quants(rng: np.random.Generator, op: str) -> tuple[Quantization, Quantization, Quantization]:
    """Random per-tensor quantizations of an add/sub/mul's two inputs and its output (a product's output scale
    twice as large, a sum's half)."""
    qa = per_tensor(float(rng.uniform(0.005, 0.2)), int(rng.integers(-128, 128)))
    qb = per_tensor(float(rng.uniform(0.005, 0.2)), int(rng.integers(-128, 128)))
    qy = per_tensor(float(rng.uniform(0.02, 0.3)) * (2 if op == "mul" else 0.5), int(rng.integers(-128, 128)))
    return qa, qb, qy


def add_binary(b: Batch, rng: np.random.Generator, i: int) -> None:
    """One random int8 add/sub/mul as case i of batch b."""
    op = str(rng.choice(["add", "sub", "mul"]))
    rank = int(rng.integers(1, 5))
    out = [int(rng.integers(1, 6)) for _ in range(rank)]

    def broadcast_shape() -> list[int]:
        shape = [d if rng.random() < 0.6 else 1 for d in out]
        return shape[int(rng.integers(0, rank)):]

    kind = rng.random()
    if kind < 0.4:
        sa, sb = out, out
    elif kind < 0.55:
        sa, sb = out, [1]
    else:
        sa, sb = (out if rng.random() < 0.5 else broadcast_shape()), broadcast_shape()
    if rng.random() < 0.5:
        sa, sb = sb, sa
    qa, qb, qy = binary_quants(rng, op)
    a = b.input(f"e{i}_a", sa, "int8", qa)
    if int(np.prod(sb)) == 1 and rng.random() < 0.7:  # a constant single value: the lut point
        bb = b.const(f"e{i}_b", rng.integers(-128, 128, size=sb).astype(np.int8), qb)
    else:
        bb = b.input(f"e{i}_b", sb, "int8", qb)
    b.apply(op, [a, bb], f"e{i}_y", {"activation": str(rng.choice(ACTS))}, qy)


def make_batch(rng: np.random.Generator, n: int) -> Batch:
    b = Batch()
    for i in range(n):
        add_binary(b, rng, i)
    # a constant single value that still broadcasts the other input to a new shape (the lut's loops)
    q = per_tensor(0.05, int(rng.integers(-128, 128)))
    x = b.input("bc_x", (4, 1), "int8", q)
    k = b.const("bc_k", np.array([[[int(rng.integers(-128, 128))]]], np.int8), q)
    b.apply("sub", [k, x], "bc_y", {"activation": "none"}, per_tensor(0.07, int(rng.integers(-128, 128))))
    return b


# The three point tests of a scheduled kernel family (schedule_harness.point_tests)
(test_portable_points_on_the_host, test_every_portable_knob_value_is_reached_on_the_host,
 test_every_point_kind_on_qemu) = point_tests(make_batch, host_nodes=16, sweep_nodes=20,
                                              sweep_seed=41, qemu_nodes=24, qemu_seed=20261127,
                                              qemu_roundings=("double", "single", "double"))


# (op, (s_a, zp_a), (s_b, zp_b), (s_y, zp_y), activation): extreme zero points, scale ratios up to 1000,
# output shifts from 1 to large
EXHAUSTIVE = [
    ("add", (0.04, -2), (0.041, -1), (0.058, -3), "none"),
    ("add", (0.02, 127), (0.03, -128), (0.05, 0), "relu"),
    ("add", (0.5, 10), (0.0005, -7), (0.6, 4), "none"),
    ("sub", (0.001, -100), (0.25, 100), (0.2, -20), "relu6"),
    ("add", (0.01, -128), (0.012, 127), (0.9, 1), "relu_n1_to_1"),
    ("mul", (0.05, -3), (0.04, 9), (0.06, -1), "none"),
    ("mul", (0.02, 127), (0.3, -128), (0.15, 7), "relu6"),
]


@pytest.mark.slow
def test_every_input_pair_through_the_tables_on_the_m4() -> None:
    """y[i, j] = a[i] op b[j] for all 256 x 256 int8 pairs, table with the doubled SMMULR form."""
    b = Batch()
    for k, (op, qa, qb, qy, act) in enumerate(EXHAUSTIVE):
        a = b.input(f"x{k}_a", (256, 1), "int8", per_tensor(*qa))
        bb = b.input(f"x{k}_b", (1, 256), "int8", per_tensor(*qb))
        b.apply(op, [a, bb], f"x{k}_y", {"activation": act}, per_tensor(*qy))
    graph = b.graph()
    schedules = {}
    for key, space in spaces(graph, "cortex-m4", "double"):
        point = {"algo": "table", "requant": "dbl", "unroll": 1}
        assert space.check(point) is None, key
        schedules[key] = point
    compiled = compile(graph, passes=False, rounding="double", target="cortex-m4", schedules=schedules,
                       unpacked_api=False)
    assert "smmulr" in ops_source(compiled)
    values = np.arange(-128, 128, dtype=np.int8)
    inputs = {n: (values.reshape(256, 1) if n.endswith("_a") else values.reshape(1, 256)) for n in graph.inputs}
    ref = run_reference(graph, inputs, rounding="double")
    outs = run_on_platform("qemu-cortex-m4")(compiled, [inputs[n] for n in graph.inputs])
    for name, got in zip(graph.outputs, outs, strict=True):
        compare(name, got, ref[name])


def test_defaults() -> None:
    b = Batch()
    x = b.input("x", (4, 8, 8), "int8", per_tensor(0.05, -3))
    y = b.input("y", (4, 8, 8), "int8", per_tensor(0.06, 7))
    b.apply("add", [x, y], "s", {"activation": "relu"}, per_tensor(0.08, -128))
    k = b.const("k", np.array([5], np.int8), per_tensor(0.1, 0))
    b.apply("mul", [x, k], "p", {"activation": "none"}, per_tensor(0.1, 2))
    (_, add_m4), (_, mul_m4) = spaces(b.graph(), "cortex-m4", "double")
    assert add_m4.default == {"algo": "table", "requant": "dbl", "unroll": 4}
    assert mul_m4.default == {"algo": "lut"}
    # a point of a tuning log written before the space was conditional ("off" values for direct and lut)
    assert add_m4.normalize({"algo": "direct", "requant": "c", "unroll": 1}) == {"algo": "direct"}
    assert add_m4.check({"algo": "direct"}) is None and mul_m4.check({"algo": "lut"}) is None
    (_, add_m3), _ = spaces(b.graph(), "cortex-m3", "double")
    assert add_m3.default == {"algo": "table", "requant": "fast", "unroll": 4}


@pytest.mark.parametrize("target", ["cortex-m0", "cortex-m3", "cortex-m4"])
def test_points_cross_compile_warning_free(target: str) -> None:
    """Points of every kind build with arm-none-eabi-gcc at -O2 and -O0 (the strict warnings), ARMv6-M too."""
    rng = np.random.default_rng(62)
    seen: dict[str, set[Any]] = {}
    for _ in range(3):
        graph = make_batch(rng, 12).graph()
        schedules = assign_points(graph, target, "double", rng, seen)
        assert_cross_compiles(compile(graph, passes=False, rounding="double", target=target, schedules=schedules),
                              target)
