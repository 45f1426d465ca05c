"""Every point of the int8 conv2d and dense spaces (algo direct | gemm and the GEMM's knobs) is bit-exact
with the reference, on random workloads: odd and single channels, strides, dilation, asymmetric padding,
kernels larger than the input, per-channel and per-tensor weights, with and without bias, every int8
activation, both roundings. Portable points on the host (property-based) and on QEMU Cortex-M3; the DSP
points (SMLAD through <arm_acle.h> and the asm blocks, int8 and pre-widened int16 weights) on QEMU
Cortex-M4. Each batch is one build: every node has its own workload and its own point.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import Batch, int8_weights, per_channel, per_tensor, scales  # noqa: E402
from schedule_harness import check_batch, run_local, run_on_platform, sweep  # noqa: E402

from utvm.compiler.kernels._gemm import Requant, pad4  # noqa: E402
from utvm.target import get_target  # noqa: E402

ACTS = ("none", "relu", "relu6", "relu_n1_to_1")


def add_conv(b: Batch, rng: np.random.Generator, i: int) -> None:
    """One random int8 conv2d (groups 1) as case i of batch b."""
    while True:
        h, w = int(rng.integers(1, 9)), int(rng.integers(1, 9))
        c, oc = int(rng.choice([1, 2, 3, 4, 5, 8, 12, 16])), int(rng.integers(1, 10))
        kh, kw = int(rng.integers(1, 5)), int(rng.integers(1, 5))
        sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        dh, dw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
        pad = tuple(int(v) for v in rng.integers(0, 3, size=4))
        oh = (h + pad[0] + pad[2] - (kh - 1) * dh - 1) // sh + 1
        ow = (w + pad[1] + pad[3] - (kw - 1) * dw - 1) // sw + 1
        if oh >= 1 and ow >= 1 and oh * ow <= 64:
            break
    n = int(rng.integers(1, 3)) if rng.random() < 0.2 else 1
    izp, ozp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    x = b.input(f"c{i}_x", (n, h, w, c), "int8", per_tensor(0.05, izp))
    if rng.random() < 0.5:
        wq = per_channel(scales(rng, oc), 0)
    else:
        wq = per_tensor(float(scales(rng, 1)[0]), 0)
    wt = b.const(f"c{i}_w", int8_weights(rng, (oc, kh, kw, c)), wq)
    inputs = [x, wt]
    if rng.random() < 0.7:
        bias_scale = 0.05 * np.asarray(wq.scale)
        inputs.append(b.const(f"c{i}_b", rng.integers(-3000, 3000, size=oc).astype(np.int32),
                              per_channel(list(bias_scale), 0) if len(bias_scale) > 1
                              else per_tensor(float(bias_scale[0]), 0)))
    out_scale = 0.05 * 0.01 * np.sqrt(kh * kw * c) * float(rng.uniform(2, 8))
    b.apply("conv2d", inputs, f"c{i}_y", {"strides": (sh, sw), "dilation": (dh, dw), "padding": pad,
                                          "groups": 1, "activation": str(rng.choice(ACTS))},
            per_tensor(out_scale, ozp))


def add_dense(b: Batch, rng: np.random.Generator, i: int) -> None:
    k, units = int(rng.integers(1, 80)), int(rng.integers(1, 13))
    batch = int(rng.integers(1, 3))
    izp, ozp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    x = b.input(f"d{i}_x", (batch, k), "int8", per_tensor(0.05, izp))
    ws = float(scales(rng, 1)[0])
    wt = b.const(f"d{i}_w", int8_weights(rng, (units, k)), per_tensor(ws, 0))
    inputs = [x, wt]
    if rng.random() < 0.7:
        inputs.append(b.const(f"d{i}_b", rng.integers(-3000, 3000, size=units).astype(np.int32),
                              per_tensor(0.05 * ws, 0)))
    b.apply("dense", inputs, f"d{i}_y", {"activation": str(rng.choice(ACTS))},
            per_tensor(0.05 * ws * np.sqrt(k) * float(rng.uniform(2, 8)), ozp))


def make_batch(rng: np.random.Generator, n_conv: int, n_dense: int) -> Batch:
    b = Batch()
    for i in range(n_conv):
        add_conv(b, rng, i)
    for i in range(n_dense):
        add_dense(b, rng, i)
    return b


@settings(max_examples=8)
@given(seed=st.integers(0, 2**32 - 1), rounding=st.sampled_from(["single", "double"]))
def test_portable_points_on_the_host(seed: int, rounding: str) -> None:
    rng = np.random.default_rng(seed)
    seen: dict[str, set[Any]] = {}
    check_batch(make_batch(rng, 6, 3), "host", rounding, rng, seen, run_local)


def test_every_portable_knob_value_is_reached_on_the_host() -> None:
    sweep(lambda rng: make_batch(rng, 10, 4), "host", 11, run_local, ("single", "double", "single"))


@pytest.mark.slow
@pytest.mark.parametrize("platform, target", [("qemu-cortex-m4", "cortex-m4"), ("qemu-cortex-m3", "cortex-m3")])
def test_every_point_kind_on_qemu(platform: str, target: str) -> None:
    """DSP (M4: ACLE and asm blocks, i8 and i16 weights, fast requantization in asm) and portable (M3)."""
    sweep(lambda rng: make_batch(rng, 14, 5), target, 20261125, run_on_platform(platform), unpacked_api=False)


@pytest.mark.parametrize("rounding, shifts, multipliers, target, ok", [
    ("single", [-2, -9], [1 << 30, (1 << 31) - 1], "host", True),
    ("single", [-1, -9], [1 << 30, 1 << 30], "host", False),
    ("double", [-1, -31], [1 << 30, 0], "cortex-m3", True),
    ("double", [0, -3], [1 << 30, 1 << 30], "cortex-m4", False),
    ("double", [-3], [1 << 30], "host", False),
    ("double", [-3], [1 << 30], "cortex-m0", False),
])
def test_fast_requantization_is_offered_only_where_it_is_exact(rounding: str, shifts: list[int],
                                                               multipliers: list[int], target: str, ok: bool) -> None:
    assert (Requant.fast_reason(rounding, multipliers, shifts, get_target(target)) is None) == ok


def test_single_rounding_short_form_is_exact() -> None:
    """(x*m + 2^(s-1)) >> s == ((x*m >> 32) + 2^(s-33)) >> (s-32) for s >= 33: exhaustive over edge values."""
    xs = [-(2**31), -(2**31) + 1, -65536, -1, 0, 1, 65535, 2**31 - 1] + list(range(-300, 300, 7))
    ms = [0, 1, 1 << 30, (1 << 31) - 1, 1518500250]
    for s in range(33, 63):
        for x in xs:
            for m in ms:
                want = (x * m + (1 << (s - 1))) >> s
                got = (((x * m) >> 32) + (1 << (s - 33))) >> (s - 32)
                assert got == want, (x, m, s)


def test_pad4() -> None:
    assert [pad4(k) for k in (1, 3, 4, 5, 8, 27)] == [4, 4, 4, 8, 8, 28]
