"""Every point of the int8 pooling spaces (max_pool2d, avg_pool2d, global_avg_pool2d: algo direct | cblock,
channels per step, the global average's requantization) is bit-exact with the reference: random windows
with strides, dilation, padding (windows clipped by the border), ceil_mode, count_include_pad, whole-plane
windows of more than 256 taps (the int16 lanes flushed per row), channel counts that are not multiples of
4, batch 2, every int8 activation. Host, QEMU Cortex-M3 (portable) and Cortex-M4 (SSUB8/SEL max, SXTAB16
sums).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import Batch, assert_cross_compiles, ops_source, per_tensor  # noqa: E402
from schedule_harness import assign_points, point_tests, spaces  # noqa: E402

from utvm.compiler import compile  # noqa: E402

ACTS = ("none", "relu", "relu6", "relu_n1_to_1")


def add_pool(b: Batch, rng: np.random.Generator, i: int) -> None:
    op = str(rng.choice(["max_pool2d", "avg_pool2d", "global_avg_pool2d"]))
    while True:
        h, w = int(rng.integers(1, 12)), int(rng.integers(1, 12))
        c = int(rng.choice([1, 3, 4, 5, 8, 12, 13, 16, 20]))
        kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        dh, dw = (int(rng.integers(1, 3)), int(rng.integers(1, 3))) if rng.random() < 0.2 else (1, 1)
        pad = tuple(int(v) for v in rng.integers(0, 2, size=4)) if rng.random() < 0.5 else (0, 0, 0, 0)
        if rng.random() < 0.15:  # the whole plane (KWS, ResNet-8)
            kh, kw, pad, sh, sw, dh, dw = h, w, (0, 0, 0, 0), 1, 1, 1, 1
        if max(pad[0], pad[2]) >= kh or max(pad[1], pad[3]) >= kw:
            continue
        oh = (h + pad[0] + pad[2] - (kh - 1) * dh - 1) // sh + 1
        ow = (w + pad[1] + pad[3] - (kw - 1) * dw - 1) // sw + 1
        if oh >= 1 and ow >= 1:
            break
    if op == "global_avg_pool2d" and rng.random() < 0.4:  # more than 256 taps: lanes flushed per row
        h, w = int(rng.integers(20, 40)), int(rng.integers(14, 20))
    n = 2 if rng.random() < 0.2 else 1
    q = per_tensor(0.05, int(rng.integers(-128, 128)))
    x = b.input(f"p{i}_x", (n, h, w, c), "int8", q)
    if op == "global_avg_pool2d":
        b.apply(op, [x], f"p{i}_y", {}, per_tensor(float(rng.uniform(0.02, 0.08)), int(rng.integers(-128, 128))))
        return
    ceil = bool(rng.random() < 0.2)
    attrs = {"pool": (kh, kw), "strides": (sh, sw), "padding": pad, "dilation": (dh, dw), "ceil_mode": ceil,
             "count_include_pad": bool(op == "avg_pool2d" and rng.random() < 0.25),
             "activation": str(rng.choice(ACTS))}
    b.apply(op, [x], f"p{i}_y", attrs, q)


def make_batch(rng: np.random.Generator, n: int) -> Batch:
    b = Batch()
    for i in range(n):
        add_pool(b, rng, i)
    # always one window of more than 256 taps (int16 lanes flushed per row) and one of 9 channels
    x = b.input("big_x", (1, 30, 20, 12), "int8", per_tensor(0.05, int(rng.integers(-128, 128))))
    b.apply("global_avg_pool2d", [x], "big_y", {}, per_tensor(0.03, int(rng.integers(-128, 128))))
    q = per_tensor(0.05, int(rng.integers(-128, 128)))
    x = b.input("avg_x", (1, 20, 18, 9), "int8", q)
    b.apply("avg_pool2d", [x], "avg_y", {"pool": (20, 18), "strides": (1, 1), "padding": (0, 0, 0, 0),
                                         "dilation": (1, 1), "ceil_mode": False, "count_include_pad": False,
                                         "activation": "relu"}, q)
    return b


# The three point tests of a scheduled kernel family (schedule_harness.point_tests)
(test_portable_points_on_the_host, test_every_portable_knob_value_is_reached_on_the_host,
 test_every_point_kind_on_qemu) = point_tests(make_batch, host_nodes=16, sweep_nodes=20,
                                              sweep_seed=51, qemu_nodes=24, qemu_seed=20261128,
                                              qemu_roundings=("double", "single", "double"))


def test_kws_average_pool_defaults_to_simd_sums_on_the_m4() -> None:
    b = Batch()
    x = b.input("x", (1, 25, 5, 64), "int8", per_tensor(0.05, -128))
    b.apply("avg_pool2d", [x], "y", {"pool": (25, 5), "strides": (2, 2), "padding": (0, 0, 0, 0),
                                     "dilation": (1, 1), "ceil_mode": False, "count_include_pad": False,
                                     "activation": "none"}, per_tensor(0.05, -128))
    ((_key, space),) = spaces(b.graph(), "cortex-m4", "double")
    assert space.default == {"algo": "cblock", "c_block": 8, "requant": "c", "tap_unroll": True}
    # points of tuning logs written before the rename (pool_cb; no tap_unroll; "off" values for direct)
    assert space.normalize({"algo": "cblock", "pool_cb": 8, "requant": "c"}) == space.default
    assert space.normalize({"algo": "direct", "pool_cb": 4, "requant": "c"}) == {"algo": "direct"}
    src = ops_source(compile(b.graph(), passes=False, rounding="double", target="cortex-m4"))
    assert "__sxtab16" in src and "tvm_sxtab16_ror8" in src
    ((_key, host),) = spaces(b.graph(), "host", "double")
    assert host.default["algo"] == "direct"


def test_windows_of_more_than_256_taps_flush_the_lanes() -> None:
    b = make_batch(np.random.default_rng(0), 0)
    src = ops_source(compile(b.graph(), passes=False, rounding="double", target="cortex-m4"))
    assert src.count("the int16 lanes are flushed after every window row") == 2


@pytest.mark.parametrize("target", ["cortex-m0", "cortex-m3", "cortex-m4"])
def test_points_cross_compile_warning_free(target: str) -> None:
    """Points of every kind build with arm-none-eabi-gcc at -O2 and -O0 (the strict warnings), ARMv6-M too."""
    rng = np.random.default_rng(63)
    seen: dict[str, set[Any]] = {}
    for _ in range(3):
        graph = make_batch(rng, 12).graph()
        schedules = assign_points(graph, target, "double", rng, seen)
        assert_cross_compiles(compile(graph, passes=False, rounding="double", target=target, schedules=schedules),
                              target)
