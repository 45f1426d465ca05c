"""The Helium (MVE) depthwise_conv2d kernel (`algo = mve` of depthwise.py): its space exists only on MVE
vocabularies, its defaults (channels as lanes for KWS-like layers, taps as lanes for micro_speech's 8-tap rows),
its geometry (column segments of equal in-bounds taps, weights re-laid in reading order), every point cross-compiles
warning-free for Cortex-M55 at -O2 and -O0, and every point is bit-exact on QEMU Cortex-M55 over workloads that
reach each of its code paths: odd channel counts and depth multipliers (tail-predicated blocks), strides,
dilation, asymmetric padding (border segments, per-pixel border windows, windows wholly in the padding), rows of
more than 8 taps (several 8-lane chunks), channels more than 127 bytes apart (no post-incremented walk),
per-channel and per-tensor quantization, both roundings.

`m55_cross_compiles` and `mve_sweep` are shared with test_mve_pool.py and test_mve_binary.py.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import (  # noqa: E402
    Batch,
    assert_cross_compiles,
    compare,
    int8_weights,
    per_channel,
    per_tensor,
    scales,
)
from schedule_harness import assign_points, run_on_platform, spaces  # noqa: E402
from test_kernels_depthwise_dsp import add_depthwise  # noqa: E402

from utvm.compiler import compile  # noqa: E402
from utvm.compiler.driver import CompiledModel  # noqa: E402
from utvm.compiler.kernels import depthwise as dw  # noqa: E402
from utvm.compiler.kernels._window import Axis  # noqa: E402
from utvm.compiler.schedule import Schedule  # noqa: E402
from utvm.ir import run_reference  # noqa: E402

# --- shared with the pool and binary MVE tests ---------------------------------------------------------------------


def m55_cross_compiles(c: CompiledModel) -> None:
    """The operators file builds warning-free for cortex-m55 (hard-float ABI: <arm_mve.h> needs it)."""
    assert_cross_compiles(c, "cortex-m55", ("-mfloat-abi=hard",))


def mve_points(graph: Any, rounding: str, rng: np.random.Generator, seen: dict[str, set[Any]]) -> dict[str, Schedule]:
    """One point per task of `graph` on cortex-m55: an `algo = mve` point where the space has one (preferring
    knob values not `seen` yet, which is updated), else the default."""
    return assign_points(graph, "cortex-m55", rounding, rng, seen, keep=lambda p: p.get("algo") == "mve")


def mve_sweep(make_batch: Callable[[np.random.Generator], Batch], seed: int, roundings: Sequence[str],
              knobs: dict[str, set[Any]], run: Callable[[CompiledModel, list[np.ndarray]], Sequence[np.ndarray]] | None
              ) -> None:
    """A batch per rounding, every node at an MVE point (values not seen yet first), built for cortex-m55; with
    `run` (a QEMU board) every output compared bit for bit with the reference, else only cross-compiled. Then
    every value of `knobs` must have been used."""
    rng = np.random.default_rng(seed)
    seen: dict[str, set[Any]] = {}
    for rounding in roundings:
        b = make_batch(rng)
        graph = b.graph()
        points = mve_points(graph, rounding, rng, seen)
        compiled = compile(graph, passes=False, rounding=rounding, target="cortex-m55", schedules=points,
                           unpacked_api=False)
        if run is None:
            m55_cross_compiles(compiled)
            continue
        inputs = b.random_inputs(rng)
        ref = run_reference(graph, inputs, rounding=rounding)
        outs = run(compiled, [inputs[n] for n in graph.inputs])
        for op, name, got in zip(compiled.operators, graph.outputs, outs, strict=True):
            compare(f"{name} [cortex-m55 {rounding} schedule {op.schedule}]", got, ref[name])
    for name, values in knobs.items():
        missing = values - seen.get(name, set())
        assert not missing, f"knob {name} never took the values {sorted(map(str, missing))}"


# --- the workloads -------------------------------------------------------------------------------------------------

def _layer(b: Batch, rng: np.random.Generator, name: str, hw: tuple[int, int], c: int, m: int, k: tuple[int, int],
           s: tuple[int, int], pad: tuple[int, int, int, int], d: tuple[int, int] = (1, 1), act: str = "relu",
           per_chan: bool = True, bias: bool = True, zp: int = -128) -> None:
    x = b.input(f"{name}_x", (1, *hw, c), "int8", per_tensor(0.05, zp))
    oc = c * m
    wq = per_channel(scales(rng, oc), 3) if per_chan else per_tensor(float(scales(rng, 1)[0]), 0)
    inputs = [x, b.const(f"{name}_w", int8_weights(rng, (1, *k, oc)), wq)]
    if bias:
        inputs.append(b.const(f"{name}_b", rng.integers(-3000, 3000, size=oc).astype(np.int32)))
    b.apply("depthwise_conv2d", inputs, f"{name}_y", {"strides": s, "dilation": d, "padding": pad,
                                                      "depth_multiplier": m, "activation": act},
            per_tensor(0.05 * 0.01 * np.sqrt(k[0] * k[1]) * float(rng.uniform(2, 8)), int(rng.integers(-128, 128))))


def make_batch(rng: np.random.Generator, n: int = 10) -> Batch:
    """Random depthwise layers plus the shapes that reach each MVE code path."""
    b = Batch()
    for i in range(n):
        add_depthwise(b, rng, i)
    _layer(b, rng, "kws", (9, 5), 64, 1, (3, 3), (1, 1), (1, 1, 1, 1))  # KWS: border segments, interior blocks
    _layer(b, rng, "ms", (13, 12), 1, 8, (10, 8), (2, 2), (4, 3, 5, 3))  # micro_speech: 8-tap rows, dm 8
    _layer(b, rng, "odd", (6, 7), 7, 3, (3, 3), (2, 1), (0, 2, 1, 0), act="relu6")  # tails, stride, asymmetric pad
    _layer(b, rng, "wide", (4, 23), 2, 5, (2, 17), (1, 1), (1, 8, 0, 8), per_chan=False)  # 3 chunks of 8 taps
    _layer(b, rng, "far", (5, 4), 160, 1, (3, 3), (1, 2), (1, 1, 1, 1), bias=False)  # 160 bytes between pixels
    _layer(b, rng, "dil", (9, 9), 5, 2, (3, 3), (1, 1), (2, 2, 2, 2), d=(2, 2), zp=17)  # dilation: gathered taps
    _layer(b, rng, "pads", (3, 3), 6, 1, (2, 2), (1, 1), (3, 3, 3, 3), act="none")  # windows wholly in padding
    _layer(b, rng, "manyb", (6, 12), 4, 1, (3, 7), (1, 1), (1, 5, 1, 5))  # > 2 border classes a side: per pixel
    for i, zp in enumerate((5, -20)):  # twins: one task, so one point (and with share, one function)
        _layer(b, rng, f"twin{i}", (7, 6), 12, 2, (3, 3), (1, 1), (1, 1, 1, 1), zp=zp)
        _layer(b, rng, f"twint{i}", (5, 9), 3, 1, (1, 5), (1, 1), (0, 2, 0, 2), per_chan=False, zp=-zp)
    return b


MVE_KNOBS = {"lanes": {"chan", "mult", "taps"}, "px_block": {1, 2, 4}, "mve_oc": {4, 8},
             "ky_unroll": {False, True}, "share": {False, True}}


# --- host side -------------------------------------------------------------------------------------------------------

def _space(batch: Batch, target: str) -> Any:
    ((_key, space),) = spaces(batch.graph(), target, "double")
    return space


def test_defaults_on_cortex_m55_and_no_mve_elsewhere() -> None:
    rng = np.random.default_rng(1)
    kws = Batch()
    _layer(kws, rng, "k", (25, 5), 64, 1, (3, 3), (1, 1), (1, 1, 1, 1))
    assert _space(kws, "cortex-m55").default == {"algo": "mve", "lanes": "chan", "px_block": 4, "mve_oc": 4,
                                                 "ky_unroll": True, "share": False}
    ms = Batch()
    _layer(ms, rng, "m", (49, 40), 1, 8, (10, 8), (2, 2), (4, 3, 5, 3))
    assert _space(ms, "cortex-m55").default == {"algo": "mve", "lanes": "taps", "px_block": 1, "mve_oc": 8,
                                                "ky_unroll": False, "share": False}
    for target in ("cortex-m4", "cortex-m3", "host"):
        space = _space(kws, target)
        assert "mve" not in space.knobs[0].values and "lanes" not in {k.name for k in space.knobs}
    assert _space(kws, "cortex-m4").default["algo"] == "plane"


def test_legality_names_what_it_refuses() -> None:
    rng = np.random.default_rng(2)
    b = Batch()
    _layer(b, rng, "k", (6, 3), 3, 2, (1, 3), (1, 1), (0, 1, 0, 1))
    space = _space(b, "cortex-m55")
    point = {"algo": "mve", "lanes": "chan", "px_block": 1, "mve_oc": 4, "ky_unroll": False, "share": False}
    assert "depth multiplier 1" in str(space.check(point))
    assert "px_block 4 > the 3 output columns" in str(space.check({**point, "lanes": "mult", "px_block": 4}))
    assert "mve_oc 8 > the depth multiplier 2" in str(space.check({**point, "lanes": "mult", "mve_oc": 8}))
    assert "nothing to unroll" in str(space.check({**point, "lanes": "mult", "ky_unroll": True}))
    assert space.check({**point, "lanes": "taps"}) is None
    b = Batch()
    _layer(b, rng, "m", (6, 6), 1, 8, (3, 3), (1, 1), (1, 1, 1, 1))
    space = _space(b, "cortex-m55")
    point = {"algo": "mve", "lanes": "taps", "px_block": 2, "mve_oc": 8, "ky_unroll": True, "share": True}
    assert "2 x 8 scalar accumulators exceed 8" in str(space.check(point))
    assert "4 x 2 vector accumulators exceed 4" in str(space.check({**point, "lanes": "mult", "px_block": 4}))


def test_segments_group_columns_by_their_in_bounds_taps() -> None:
    S = dw.Segment
    # KWS: 5 columns, 3 taps, padding 1: the left and right columns lose a tap
    assert dw.segments(Axis(5, 0, 5, 3, 1, 1, 1)) == [S(0, 1, 1, 3), S(1, 4, 0, 3), S(4, 5, 0, 2)]
    # micro_speech: 20 columns, 8 taps, stride 2, padding 3
    assert dw.segments(Axis(20, 0, 40, 8, 2, 1, 3)) == [S(0, 1, 3, 8), S(1, 2, 1, 8), S(2, 18, 0, 8),
                                                         S(18, 19, 0, 7), S(19, 20, 0, 5)]
    # more border classes than MAX_BORDER_SEGMENTS on a side: those columns find their taps per pixel
    assert dw.segments(Axis(12, 0, 12, 7, 1, 1, 5))[0] == S(0, 5, None, None)
    # no window inside: few classes stay constant, many go per pixel
    assert dw.segments(Axis(2, 0, 1, 3, 1, 1, 1)) == [S(0, 1, 1, 2), S(1, 2, 0, 1)]
    assert dw.segments(Axis(7, 0, 1, 9, 1, 1, 6)) == [S(0, 7, None, None)]


def test_blocks_and_weights_in_reading_order() -> None:
    assert dw.blocks(10, 8, "chan") == [dw.Block(0, 8), dw.Block(8, 2)]
    assert dw.blocks(7, 4, "mult") == [dw.Block(0, 4), dw.Block(4, 3)]
    assert dw.blocks(7, 4, "taps") == [dw.Block(0, 4), dw.Block(4, 3)]
    assert dw.blocks(5, 8, "taps") == [dw.Block(0, 5)]
    rng = np.random.default_rng(3)
    b = Batch()
    _layer(b, rng, "k", (4, 4), 6, 1, (2, 2), (1, 1), (0, 0, 0, 0))
    graph = b.graph()
    from utvm.compiler.kernels import FileScope, KernelContext

    ctx = KernelContext(graph.nodes[0], 0, graph, "double", "f0", FileScope("p"), {}, ["out0"], "cortex-m55")
    layer = dw.Layer.of(ctx, ctx.params())
    w = layer.w  # [ky, kx, oc]
    chan = dw._Mve(ctx, layer, {"lanes": "chan", "px_block": 1, "mve_oc": 4, "ky_unroll": False})._weights()
    # block 0: channels 0-3 tap after tap; block 1: channels 4-5 padded to a vector
    want = [w[ky, kx, 0:4] for ky in range(2) for kx in range(2)]
    want += [np.concatenate([w[ky, kx, 4:6], [0, 0]]) for ky in range(2) for kx in range(2)]
    assert np.array_equal(chan, np.concatenate(want))
    taps = dw._Mve(ctx, layer, {"lanes": "taps", "px_block": 1, "mve_oc": 4, "ky_unroll": False})._weights()
    # per input channel (dm 1: one output each) the rows of its taps, then 8 bytes of padding
    want = [w[ky, :, oc] for oc in range(6) for ky in range(2)] + [np.zeros(8, np.int64)]
    assert np.array_equal(taps, np.concatenate(want))


def test_layers_of_one_task_share_one_function() -> None:
    """With share, layers of one workload call one file-scope function with their own tables and numbers (per
    channel: operand tables; per tensor: operand scalars); without it each has its own code."""
    rng = np.random.default_rng(5)
    b = Batch()
    for i, zp in enumerate((5, -20)):
        _layer(b, rng, f"pc{i}", (7, 6), 12, 2, (3, 3), (1, 1), (1, 1, 1, 1), zp=zp)
        _layer(b, rng, f"pt{i}", (5, 9), 3, 1, (1, 5), (1, 1), (0, 2, 0, 2), per_chan=False, zp=-zp)
    graph = b.graph()
    keys = {key for key, _space in spaces(graph, "cortex-m55", "double")}
    assert len(keys) == 2
    for share in (False, True):
        points = {key: {**space.default, "share": share} for key, space in spaces(graph, "cortex-m55", "double")}
        src = next(v for k, v in compile(graph, passes=False, rounding="double", target="cortex-m55",
                                         schedules=points).sources.items() if k.endswith("_ops.c"))
        defs = re.findall(r"static int32_t (tvmgen_default_dw_[0-9a-f]{12})\(", src)
        calls = re.findall(r"return (tvmgen_default_dw_[0-9a-f]{12})\(", src)
        assert (len(defs), len(calls)) == ((2, 4) if share else (0, 0))
        if share:
            assert sorted(set(calls)) == sorted(defs)


def test_every_mve_point_cross_compiles_warning_free() -> None:
    mve_sweep(lambda rng: make_batch(rng, 6), 71, ("double", "single", "double"), MVE_KNOBS, None)


def test_chan_rows_walk_one_pointer_with_a_low_register() -> None:
    """KWS's input columns are 64 bytes apart: the default point loads them with the post-incremented VLDRB.S32
    helper (its base constrained to r0-r7, the only registers the widening load's encoding takes)."""
    rng = np.random.default_rng(4)
    b = Batch()
    _layer(b, rng, "k", (25, 5), 64, 1, (3, 3), (1, 1), (1, 1, 1, 1))
    src = next(v for k, v in compile(b.graph(), passes=False, rounding="double", target="cortex-m55").sources.items()
               if k.endswith("_ops.c"))
    assert "TVM_VLDRB_S32_PI(x0_0, xr, 64);" in src and '"+l"(p)' in src and "TVM_MVE_IN_ORDER" in src
    body = src.split("TVM_MVE_IN_ORDER static int32_t", 1)[1].split("\n}\n", 1)[0]
    assert "vldrbq_s32" in body and "float" not in body


# --- on QEMU Cortex-M55 -----------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_every_mve_point_is_bit_exact_on_qemu_m55() -> None:
    mve_sweep(lambda rng: make_batch(rng, 10), 20261201, ("double", "single", "double", "single"), MVE_KNOBS,
              run_on_platform("qemu-cortex-m55"))
