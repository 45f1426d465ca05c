"""Scratch sized to need (docs/kernels.md §12): the GEMM's `widen = inline` (dense and 1x1 convolutions read
their inputs where they lie: no scratch) and depthwise planes in bands of output rows (`band`), bit-exact at
block boundaries (odd sizes, a last partial group of the reduction, a last partial block of pixels, a last
partial band, halos larger than a band), with the scratch each point's space announces (`Space.scratch`)
equal to what its kernel asks for. Portable points on the host; the DSP forms (ACLE and the asm blocks,
the SIMD copy of 4 channels) on QEMU Cortex-M4 in one build.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import Batch, int8_weights, per_channel, per_tensor, scales  # noqa: E402
from schedule_harness import check_points, run_local, run_on_platform, spaces  # noqa: E402

from utvm.compiler import compile  # noqa: E402
from utvm.compiler.kernels import FileScope, KernelContext, get_kernel, get_space  # noqa: E402
from utvm.compiler.kernels.depthwise import Geometry  # noqa: E402
from utvm.compiler.lower import fold_constant_aliases, lower  # noqa: E402
from utvm.compiler.schedule import Schedule  # noqa: E402
from utvm.frontend import load  # noqa: E402
from utvm.ir.graph import Graph  # noqa: E402
from utvm.support.models import models_dir  # noqa: E402


def add_dense(b: Batch, rng: np.random.Generator, name: str, k: int, units: int, batch: int = 1) -> None:
    x = b.input(f"{name}_x", (batch, k), "int8", per_tensor(0.05, int(rng.integers(-128, 128))))
    ws = float(scales(rng, 1)[0])
    wt = b.const(f"{name}_w", int8_weights(rng, (units, k)), per_tensor(ws, 0))
    bias = b.const(f"{name}_b", rng.integers(-3000, 3000, size=units).astype(np.int32), per_tensor(0.05 * ws, 0))
    b.apply("dense", [x, wt, bias], f"{name}_y", {"activation": "none"},
            per_tensor(0.05 * ws * np.sqrt(k) * 3, int(rng.integers(-128, 128))))


def add_conv(b: Batch, rng: np.random.Generator, name: str, h: int, w: int, c: int, oc: int,
             strides: tuple[int, int]) -> None:
    """A 1x1 convolution without padding (its pixels' channels are contiguous: `widen = inline` applies)."""
    x = b.input(f"{name}_x", (1, h, w, c), "int8", per_tensor(0.05, int(rng.integers(-128, 128))))
    wq = per_channel(scales(rng, oc), 0)
    wt = b.const(f"{name}_w", int8_weights(rng, (oc, 1, 1, c)), wq)
    bias = b.const(f"{name}_b", rng.integers(-3000, 3000, size=oc).astype(np.int32),
                   per_channel(list(0.05 * np.asarray(wq.scale)), 0))
    b.apply("conv2d", [x, wt, bias], f"{name}_y", {"strides": strides, "dilation": (1, 1), "padding": (0, 0, 0, 0),
                                                   "groups": 1, "activation": "relu"},
            per_tensor(0.05 * 0.01 * np.sqrt(c) * 4, int(rng.integers(-128, 128))))


def add_dw(b: Batch, rng: np.random.Generator, name: str, h: int, w: int, c: int, m: int, kernel: tuple[int, int],
           strides: tuple[int, int], dilation: tuple[int, int], pad: tuple[int, int, int, int]) -> None:
    x = b.input(f"{name}_x", (1, h, w, c), "int8", per_tensor(0.05, int(rng.integers(-128, 128))))
    n = c * m
    wq = per_channel(scales(rng, n), 3)
    wt = b.const(f"{name}_w", int8_weights(rng, (1, *kernel, n)), wq)
    bias = b.const(f"{name}_b", rng.integers(-3000, 3000, size=n).astype(np.int32),
                   per_channel(list(0.05 * np.asarray(wq.scale)), 0))
    b.apply("depthwise_conv2d", [x, wt, bias], f"{name}_y",
            {"strides": strides, "dilation": dilation, "padding": pad, "depth_multiplier": m, "activation": "relu6"},
            per_tensor(0.05 * 0.01 * np.sqrt(kernel[0] * kernel[1]) * 4, int(rng.integers(-128, 128))))


#: depthwise layers whose bands end off a band boundary: (h, w, c, m, kernel, strides, dilation, padding)
DW_CASES = [
    (9, 7, 5, 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),    # 9 rows: bands of 2, 4, 8 end partial
    (13, 6, 1, 3, (5, 4), (2, 2), (1, 1), (2, 1, 2, 2)),   # stride 2, depth multiplier, halo > a band's rows
    (11, 5, 4, 2, (3, 3), (2, 1), (2, 1), (2, 1, 1, 1)),   # dilated rows: the halo spans 2 input rows a tap
    (7, 9, 8, 1, (2, 3), (1, 2), (1, 1), (0, 1, 1, 0)),    # asymmetric padding, even kernel height
    (12, 4, 3, 1, (4, 2), (3, 1), (1, 2), (0, 0, 0, 0)),   # no padding, stride larger than the halo (no halo)
]
#: dense layers: a last group of 1..3 values, one block of outputs or several
DENSE_CASES = [(1, 3), (3, 5), (6, 4), (7, 9), (13, 1), (41, 6)]
#: 1x1 convolutions: pixels evenly spaced (one stride) or not (a pointer each), ragged last blocks of pixels
CONV_CASES = [(3, 5, 7, 5, (1, 1)), (5, 4, 4, 3, (2, 1)), (1, 7, 3, 2, (1, 2)), (4, 5, 12, 6, (1, 2))]


def make_batch(rng: np.random.Generator) -> Batch:
    b = Batch()
    for i, (k, units) in enumerate(DENSE_CASES):
        add_dense(b, rng, f"d{i}", k, units, batch=1 + i % 2)
    for i, (h, w, c, oc, strides) in enumerate(CONV_CASES):
        add_conv(b, rng, f"c{i}", h, w, c, oc, strides)
    for i, case in enumerate(DW_CASES):
        add_dw(b, rng, f"w{i}", *case)
    return b


def contexts(graph: Graph, target: str) -> list[KernelContext]:
    graph = fold_constant_aliases(graph)
    return [KernelContext(node, i, graph, "double", f"f{i}", FileScope("p"), {0: "in0"}, ["out0"], target)
            for i, node in enumerate(graph.nodes)]


@pytest.mark.parametrize("target", ["host", "cortex-m4", "cortex-m55"])
def test_every_memory_variant_asks_for_the_scratch_its_space_says(target: str) -> None:
    """For every node, every point of its memory knobs (`Space.leaner`) and a sample of its whole space: the
    kernel's scratch_bytes equal Space.scratch of the point, and the options come fastest first."""
    rng = np.random.default_rng(3)
    checked = 0
    for ctx in contexts(make_batch(rng).graph(), target):
        space = get_space(ctx)
        assert space.memory_knobs, ctx.node.op
        options = space.leaner(space.default)
        assert options and [o.cost for o in options] == sorted(o.cost for o in options)
        points = [o.point for o in options]
        legal = list(space.points())
        points += [legal[int(j)] for j in rng.choice(len(legal), size=min(6, len(legal)), replace=False)]
        for point in points:
            ctx.schedule = dict(point)
            code = get_kernel(ctx.node, ctx.index)(ctx)
            assert code.scratch_bytes == space.scratch(point), (ctx.node.op, point)
            checked += 1
    assert checked > 50


def assign(graph: Graph, target: str, pick: Callable[[str, list[Schedule], int], Schedule],
           rounding: str = "double") -> dict[str, Schedule]:
    """A point per task: pick(op, the memory variants of its default point, node index)."""
    out = {}
    for i, (key, space) in enumerate(spaces(graph, target, rounding)):
        out[key] = pick(graph.nodes[i].op, [o.point for o in space.leaner(space.default)], i)
    return out


def _variant(want: dict[str, Any]) -> Callable[[str, list[Schedule], int], Schedule]:
    """The first variant with the wanted memory knobs (per op: {op: {knob: value or a list cycled by node}})."""
    def pick(op: str, variants: list[Schedule], i: int) -> Schedule:
        knobs = {k: (v[i % len(v)] if isinstance(v, list) else v) for k, v in want.get(op, {}).items()}
        fit = [p for p in variants if all(p.get(k) == v for k, v in knobs.items())]
        assert fit, (op, knobs, variants)
        return fit[0]
    return pick


#: the band of each DW_CASES layer in each host build (every band value, partial last bands, halos)
HOST_BANDS = [(8, 4, 2, 1, 2), (2, 1, 4, 4, 1)]


def test_inline_gemm_and_plane_bands_are_bit_exact_on_the_host() -> None:
    """Portable C, both roundings: the GEMM inline on every dense and 1x1 layer, each depthwise layer in two
    band sizes (HOST_BANDS)."""
    rng = np.random.default_rng(21)
    batch = make_batch(rng)
    graph = batch.graph()
    first_dw = len(DENSE_CASES) + len(CONV_CASES)
    for rounding, bands in zip(("double", "single"), HOST_BANDS, strict=True):
        def pick(op: str, variants: list[Schedule], i: int, bands: tuple[int, ...] = bands) -> Schedule:
            if op == "depthwise_conv2d":
                band = bands[i - first_dw]
                return next(p for p in variants if p["algo"] == "plane" and p["band"] == band)
            return _variant({op: {"algo": "gemm", "widen": "inline"}})(op, variants, i)

        compiled = check_points(batch, "host", rounding, assign(graph, "host", pick, rounding), rng, run_local)
        assert all(op.task for op in compiled.operators)  # every operator ran the point given to it
    assert {b for bands in HOST_BANDS for b in bands} == {1, 2, 4, 8}


@pytest.mark.slow
def test_dsp_inline_gemm_and_plane_bands_on_qemu_cortex_m4() -> None:
    """One firmware: the inline GEMM in ACLE and in each asm form (int8 and int16 weights, the last partial
    group in C), pixels through one pointer or one each; depthwise bands with the SIMD copy of 4 channels and the
    value-by-value copy."""
    rng = np.random.default_rng(5)
    batch = make_batch(rng)
    graph = batch.graph()
    exts = ["acle", "asm", "asm_ldr", "asm_run"]
    w_fmts = ["i8", "i16"]

    def pick(op: str, variants: list[Schedule], i: int) -> Schedule:
        ctx = contexts(graph, "cortex-m4")[i]
        space = get_space(ctx)
        if op == "depthwise_conv2d":
            plane = [o.point for o in space.leaner(space.default) if o.point["algo"] == "plane" and o.point["band"]]
            return plane[i % len(plane)]
        base = {**space.default, "algo": "gemm", "widen": "inline"}
        for j in range(len(exts) * len(w_fmts)):
            p = {**base, "ext": exts[(i + j) % 4], "w_fmt": w_fmts[(i + j // 4) % 2],
                 "px_block": 1 if op == "dense" else 1 + (i % 2), "oc_block": 2}
            p = {k: v for k, v in p.items() if k in base}
            if space.check(p) is None:
                return p
        raise AssertionError(f"node {i}: no inline point")

    schedules = assign(graph, "cortex-m4", pick)
    used = {(p.get("ext"), p.get("w_fmt")) for p in schedules.values() if p.get("widen") == "inline"}
    assert {e for e, _ in used} == set(exts) and {w for _, w in used} == set(w_fmts)
    assert {p["c_block"] for p in schedules.values() if p.get("algo") == "plane"} == {1, 4}
    compiled = check_points(batch, "cortex-m4", "double", schedules, rng, run_on_platform("qemu-cortex-m4"))
    assert all(op.task for op in compiled.operators)  # every operator ran the point given to it


def test_micro_speech_like_layers_take_little_scratch_by_default() -> None:
    """A 4000 -> 4 dense (micro_speech's last layer) widens its row where it lies: no scratch (it took 8000
    bytes); a 640 -> 128 dense keeps its column (many blocks of outputs would widen it again each); the
    micro_speech depthwise (49 x 40 input, 10 x 8 kernel, stride 2, 8 outputs) takes its planes in bands."""
    rng = np.random.default_rng(1)
    b = Batch()
    add_dense(b, rng, "ms", 4000, 4)
    add_dense(b, rng, "ad", 640, 128)
    add_dw(b, rng, "dw", 49, 40, 1, 8, (10, 8), (2, 2), (1, 1), (4, 3, 5, 3))
    lw = lower(b.graph(), "m", "double", target="cortex-m4")
    scratch = {f.node.outputs[0]: f.code.scratch_bytes for f in lw.funcs}
    points = {f.node.outputs[0]: f.schedule for f in lw.funcs}
    assert points["ms_y"]["widen"] == "inline" and scratch["ms_y"] == 0
    assert points["ad_y"]["widen"] == "copy" and scratch["ad_y"] == 2 * 640
    (dw,) = [f for f in lw.funcs if f.node.op == "depthwise_conv2d"]
    whole = 2 * Geometry.of(contexts(lw.graph, "cortex-m4")[2].params()).plane_size()
    assert points["dw_y"]["band"] > 0 and 0 < scratch["dw_y"] <= whole // 2


#: TFLite Micro's arena for the repository's int8 models on Cortex-M4 (the interpreter's arena in the
#: firmware of TFLM with CMSIS-NN's reference counterpart, docs/tuning.md "The kernels benchmark"); for the
#: hello_world model, tflite-micro's Python interpreter's `print_allocations()` total
TFLM_ARENA = {"tflm/micro_speech_quantized.tflite": 6788, "mlperf_tiny/kws_ref_model.tflite": 22772,
              "mlperf_tiny/pretrainedResnet_quant.tflite": 54340, "mlperf_tiny/ad01_int8.tflite": 2260,
              "tflm/hello_world_int8.tflite": 1504}


@pytest.mark.parametrize("model", sorted(TFLM_ARENA))
def test_default_cortex_m4_workspace_of_the_repo_models_is_within_tflm_arena(model: str) -> None:
    path = models_dir() / model
    if not path.is_file():
        pytest.skip(f"{path} is not in this checkout")
    compiled = compile(load(path), rounding="double", target="cortex-m4")
    assert compiled.plan.workspace_bytes <= TFLM_ARENA[model]
