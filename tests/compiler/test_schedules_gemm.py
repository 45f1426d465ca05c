"""Every point of the int8 conv2d and dense spaces (algo direct | gemm and the GEMM's knobs) is bit-exact
with the reference, on random workloads: odd and single channels, strides, dilation, asymmetric padding,
kernels larger than the input, per-channel and per-tensor weights, with and without bias, every int8
activation, both roundings. Portable points on the host (property-based) and on QEMU Cortex-M3; the DSP
points (SMLAD through <arm_acle.h> and the asm blocks, int8 and pre-widened int16 weights) on QEMU
Cortex-M4. Each batch is one build: every node has its own workload and its own point.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import Batch, int8_weights, per_channel, per_tensor, scales  # noqa: E402
from schedule_harness import QEMU_TARGETS, check_batch, run_local, run_on_platform, sweep  # noqa: E402

from utvm.compiler import compile  # noqa: E402
from utvm.compiler.kernels import FileScope, KernelContext  # noqa: E402
from utvm.compiler.kernels._gemm import pad4  # noqa: E402
from utvm.compiler.kernels.conv import direct_default, direct_knobs  # noqa: E402
from utvm.compiler.kernels.requant import form_reason  # noqa: E402
from utvm.compiler.lower import choose_schedule, fold_constant_aliases  # noqa: E402
from utvm.compiler.schedule import Schedule  # noqa: E402
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


def make_batch(rng: np.random.Generator, n_conv: int, n_dense: int,
               conv: Callable[[Batch, np.random.Generator, int], None] | None = None,
               dense: Callable[[Batch, np.random.Generator, int], None] | None = None) -> Batch:
    """`n_conv` convolutions then `n_dense` dense layers, made by `conv` / `dense` (default: this file's)."""
    b = Batch()
    for i in range(n_conv):
        (conv or add_conv)(b, rng, i)
    for i in range(n_dense):
        (dense or add_dense)(b, rng, i)
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
@pytest.mark.parametrize("platform, target", QEMU_TARGETS)
def test_every_point_kind_on_qemu(platform: str, target: str) -> None:
    """DSP (M4: ACLE and asm blocks, i8 and i16 weights, fast requantization in asm), portable (M3) and Helium
    (M55: the MVE GEMM's blocks, asm and C reductions, columns copied or read in place, beside its DSP points)."""
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
    assert (form_reason("fast", rounding, multipliers, shifts, get_target(target)) is None) == ok


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


# --- old tuning logs ------------------------------------------------------------------------------------------

def _contexts(target: str) -> list[KernelContext]:
    """A context for every node of a batch of 2 convs and 2 denses (node order: convs first)."""
    graph = fold_constant_aliases(make_batch(np.random.default_rng(5), 2, 2).graph())
    return [KernelContext(node, i, graph, "double", f"f{i}", FileScope("p"), {}, ["out0"], target)
            for i, node in enumerate(graph.nodes)]


#: points as tuning logs wrote them before the spaces became conditional: flat, every knob named, the GEMM's
#: unroll called k_unroll (a gemm point of the old conv2d / dense spaces on Cortex-M4, and their direct point)
OLD_GEMM = {"algo": "gemm", "px_block": 1, "oc_block": 2, "k_unroll": 1, "w_fmt": "i16", "requant": "c",
            "no_sched": True, "ext": "acle", "share": False}
OLD_DIRECT = {"algo": "direct", "px_block": 2, "oc_block": 2, "k_unroll": 2, "w_fmt": "i8", "requant": "c",
              "no_sched": False, "ext": "c", "share": False}


@pytest.mark.parametrize("target, old, new", [
    ("cortex-m4", OLD_GEMM, {"algo": "gemm", "px_block": 1, "oc_block": 2, "unroll": 1, "w_fmt": "i16",
                             "requant": "c", "no_sched": True, "ext": "acle", "share": False, "widen": "copy"}),
    ("host", OLD_DIRECT, {"algo": "direct"}),
])
def test_old_flat_points_apply_without_a_warning(target: str, old: Schedule, new: Schedule) -> None:
    for ctx in _contexts(target):
        key = ctx.task_key()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got_key, point, source = choose_schedule(ctx, {key: dict(old)})
        assert (got_key, point, source) == (key, new, "given"), ctx.node.op


@pytest.mark.parametrize("change, reason", [
    ({"requant": "dbl"}, "requant dbl: the GEMM has no doubled-accumulator form"),
    ({"ext": "neon"}, "knob 'ext' = 'neon' is not one of ['acle', 'asm', 'asm_ldr', 'asm_run']"),
    ({"w_fmt": "i4"}, "knob 'w_fmt' = 'i4' is not one of ['i8', 'i16']"),
])
def test_a_point_naming_a_knob_value_the_space_lacks_is_refused_in_one_line(change: Schedule, reason: str) -> None:
    for ctx in _contexts("cortex-m4"):
        key = ctx.task_key()
        notes: list[str] = []
        with pytest.warns(UserWarning) as caught:
            got_key, point, source = choose_schedule(ctx, {key: {**OLD_GEMM, **change}}, notes.append)
        assert source == "default" and point["algo"] == "gemm", point
        (msg,) = notes
        assert "\n" not in msg and f"({reason})" in msg and str(caught[0].message) == msg


def test_direct_knobs_are_the_depthwise_constants_of_old() -> None:
    """The direct kernel's knobs (shared with the depthwise space): none for conv2d; taps written out up to
    32 and m locals up to a depth multiplier of 16 by default, as the kernel always did."""
    from utvm.ops.conv2d import Conv2DParams

    def params(op: str, kernel: tuple[int, int], m: int) -> Conv2DParams:
        return Conv2DParams(op, "int8", (1, 8, 8, 2), (1, *kernel, 2 * m), (1, 8, 8, 2 * m), (1, 1), (1, 1),
                            (0, 0, 0, 0), 1, m, False, "none", -128, 127)

    assert direct_knobs(params("conv2d", (3, 3), 1)) == ()
    assert [k.name for k in direct_knobs(params("depthwise_conv2d", (3, 3), 1))] == ["taps"]
    assert [k.name for k in direct_knobs(params("depthwise_conv2d", (3, 3), 2))] == ["taps", "m_regs"]
    assert direct_default(params("depthwise_conv2d", (4, 8), 16)) == {"taps": "unrolled", "m_regs": True}
    assert direct_default(params("depthwise_conv2d", (6, 6), 17)) == {"taps": "loop", "m_regs": False}


def _asm_lines(target: str, change: Schedule) -> list[str]:
    """The instructions of the first asm block of the first conv's GEMM (batch of _contexts) compiled at a 2 x 2
    point with int8 weights, changed by `change`."""
    from utvm.compiler.kernels import get_space

    ctx = _contexts(target)[0]  # a conv of at least 4 output pixels and 4 channels
    space = get_space(ctx)
    point = {**space.default, "algo": "gemm", "px_block": 2, "oc_block": 2, "w_fmt": "i8", **change}
    assert space.check(point) is None, space.check(point)
    graph = make_batch(np.random.default_rng(5), 2, 2).graph()
    compiled = compile(graph, passes=False, rounding="double", target=target, schedules={ctx.task_key(): point})
    (op,) = [o for o in compiled.operators if o.task == ctx.task_key()]
    assert op.schedule == point, op.schedule
    text = "".join(compiled.sources.values())
    asm = text[text.index("__asm__ __volatile__(\"ld"):]
    asm = asm[:asm.index(":")]
    return [line.split('"')[1].split()[0] for line in asm.splitlines() if '"' in line]


@pytest.mark.parametrize("ext, w_fmt, want", [
    # 2 pixels x 2 channels: LDRD x pairs, each channel's weights before its SMLADs (the historical block)
    ("asm", "i8", ["ldrd", "ldrd", "ldr", "sxtb16", "sxtb16", *["smlad"] * 4, "ldr", "sxtb16", "sxtb16",
                   *["smlad"] * 4]),
    ("asm", "i16", ["ldrd", "ldrd", "ldrd", *["smlad"] * 4, "ldrd", *["smlad"] * 4]),
    # single LDRs: the x words and the first channel's weights back to back
    ("asm_ldr", "i8", [*["ldr"] * 5, "sxtb16", "sxtb16", *["smlad"] * 4, "ldr", "sxtb16", "sxtb16",
                       *["smlad"] * 4]),
    ("asm_ldr", "i16", [*["ldr"] * 6, *["smlad"] * 4, "ldr", "ldr", *["smlad"] * 4]),
    # every load of the group in one run
    ("asm_run", "i8", [*["ldr"] * 6, "sxtb16", "sxtb16", *["smlad"] * 4, "sxtb16", "sxtb16", *["smlad"] * 4]),
])
def test_asm_forms_order_the_loads_of_a_group(ext: str, w_fmt: str, want: list[str]) -> None:
    assert _asm_lines("cortex-m4", {"ext": ext, "w_fmt": w_fmt}) == want


@pytest.mark.parametrize("px, ob, ext, w_fmt, need", [
    (2, 2, "asm", "i8", 12), (2, 2, "asm_ldr", "i16", 12), (2, 2, "asm_run", "i8", 13),
    (2, 2, "asm_run", "i16", 14), (1, 4, "asm_run", "i8", 13), (1, 4, "asm_run", "i16", 16), (4, 1, "asm", "i8", 16),
])
def test_asm_forms_are_legal_only_where_their_registers_fit(px: int, ob: int, ext: str, w_fmt: str,
                                                             need: int) -> None:
    from utvm.compiler.kernels import get_space
    from utvm.compiler.kernels._gemm import MAX_ASM_REGISTERS, asm_registers

    assert asm_registers(px, ob, ext, w_fmt) == need
    ctx = _contexts("cortex-m4")[0]  # a conv of at least 4 output pixels and 4 channels
    space = get_space(ctx)
    reason = space.check({**space.default, "algo": "gemm", "px_block": px, "oc_block": ob, "w_fmt": w_fmt,
                          "ext": ext})
    if need > MAX_ASM_REGISTERS:
        assert reason == f"ext {ext}: the asm block needs {need} registers (at most {MAX_ASM_REGISTERS})"
    else:
        assert reason is None
