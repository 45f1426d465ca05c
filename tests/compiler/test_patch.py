"""Row-patch stages (utvm.compiler.patch): the rewritten graph equals the unsplit one bit for bit, in the
reference interpreter over random conv / depthwise / pool stacks (strides 1 and 2, SAME and VALID padding,
dilation, odd sizes), and in the generated C in every convention.

`stack_tflite` and `mobilenet_tflite` build the int8 models (also used by tests/compiler/test_memory_aware.py
and `python -m bench memory`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tflite_builder import TFLiteBuilder  # noqa: E402
from utvm.compiler import patch  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.ir import run_reference  # noqa: E402
from utvm.ir.graph import Graph  # noqa: E402
from utvm.ir.verify import verify  # noqa: E402

#: a layer of `stack_tflite`: (kind, channels out (conv/pw), kernel, stride, dilation, padding 0 SAME / 1 VALID)
Layer = tuple[str, int, int, int, int, int]


def _out(h: int, k: int, s: int, d: int, pad: int) -> int:
    return -(-h // s) if pad == 0 else (h - (k - 1) * d - 1) // s + 1


def _chain(b: TFLiteBuilder, rng: np.random.Generator, prefix: str, hw: tuple[int, int], c_in: int,
           layers: Sequence[Layer], head: int = 0) -> tuple[int, int]:
    """Add one chain of `layers` (see stack_tflite) to `b`, its tensors named `<prefix>...`; returns the indices
    of its input and output tensors."""
    h, w = hw
    c = c_in
    scale, zp = 0.02, -5
    x = b.tensor(f"{prefix}input", (1, h, w, c), "int8", scale=scale, zero_point=zp)
    first = x
    for n, (kind, c_out, k, s, d, pad) in enumerate(layers):
        oh, ow = _out(h, k, s, d, pad), _out(w, k, s, d, pad)
        if kind in ("conv", "dw"):
            co = c_out if kind == "conv" else c
            shape = (co, k, k, c) if kind == "conv" else (1, k, k, c)
            axis = 0 if kind == "conv" else 3
            taps = k * k * (c if kind == "conv" else 1)
            ws = rng.uniform(0.5, 1.5, co) * 2.0 / (127 * np.sqrt(taps))
            wt = b.tensor(f"{prefix}w{n}", shape, "int8", data=rng.integers(-127, 128, shape), scale=list(ws),
                          zero_point=0, axis=axis)
            bt = b.tensor(f"{prefix}b{n}", (co,), "int32", data=rng.integers(-400, 400, co), scale=list(scale * ws),
                          zero_point=0)
            # y = sum x * w keeps the spread of x: std(w) * sqrt(taps) ~ 1 in real terms
            out_scale, out_zp = scale * 1.2, int(rng.integers(-10, 10))
            y = b.tensor(f"{prefix}t{n}", (1, oh, ow, co), "int8", scale=out_scale, zero_point=out_zp)
            if kind == "conv":
                b.op("CONV_2D", [x, wt, bt], [y], "Conv2DOptions", Padding=pad, StrideH=s, StrideW=s,
                     DilationHFactor=d, DilationWFactor=d, FusedActivationFunction=n % 2)
            else:
                b.op("DEPTHWISE_CONV_2D", [x, wt, bt], [y], "DepthwiseConv2DOptions", Padding=pad, StrideH=s,
                     StrideW=s, DepthMultiplier=1, DilationHFactor=d, DilationWFactor=d, FusedActivationFunction=0)
            scale, zp, c = out_scale, out_zp, co
        else:
            y = b.tensor(f"{prefix}t{n}", (1, oh, ow, c), "int8", scale=scale, zero_point=zp)
            b.op("MAX_POOL_2D" if kind == "max" else "AVERAGE_POOL_2D", [x], [y], "Pool2DOptions", Padding=pad,
                 StrideH=s, StrideW=s, FilterHeight=k, FilterWidth=k, FusedActivationFunction=0)
        x, h, w = y, oh, ow
    if head:
        p = b.tensor(f"{prefix}pooled", (1, 1, 1, c), "int8", scale=scale, zero_point=zp)
        b.op("AVERAGE_POOL_2D", [x], [p], "Pool2DOptions", Padding=1, StrideH=1, StrideW=1, FilterHeight=h,
             FilterWidth=w, FusedActivationFunction=0)
        f = b.tensor(f"{prefix}flat", (1, c), "int8", scale=scale, zero_point=zp)
        shp = b.tensor(f"{prefix}flat_shape", (2,), "int32", data=np.array([1, c]))
        b.op("RESHAPE", [p, shp], [f])
        ws = rng.uniform(0.5, 1.5, head) * 2.0 / (127 * np.sqrt(c))
        wt = b.tensor(f"{prefix}fc_w", (head, c), "int8", data=rng.integers(-127, 128, (head, c)), scale=list(ws),
                      zero_point=0)
        bt = b.tensor(f"{prefix}fc_b", (head,), "int32", data=rng.integers(-400, 400, head), scale=list(scale * ws),
                      zero_point=0)
        y = b.tensor(f"{prefix}logits", (1, head), "int8", scale=scale * 4, zero_point=3)
        b.op("FULLY_CONNECTED", [f, wt, bt], [y], "FullyConnectedOptions", FusedActivationFunction=0)
        x = y
    return first, x


def stack_tflite(rng: np.random.Generator, hw: tuple[int, int], c_in: int, layers: Sequence[Layer],
                 head: int = 0) -> bytes:
    """An int8 model: input [1, H, W, c_in] through `layers` (conv (every other one with a fused ReLU), dw, max,
    avg), then with `head` > 0 an average pool over the whole map and a fully connected layer of `head` outputs.
    Weights per channel, scales chosen so that activations spread over the int8 range."""
    b = TFLiteBuilder()
    x, y = _chain(b, rng, "", hw, c_in, layers, head)
    return b.build([x], [y])


def stacks_tflite(rng: np.random.Generator, chains: Sequence[tuple[tuple[int, int], int, Sequence[Layer]]]) -> bytes:
    """One int8 model holding independent chains (input k -> output k), each (hw, c_in, layers) as stack_tflite."""
    b = TFLiteBuilder()
    ends = [_chain(b, rng, f"s{k}_", hw, c, layers) for k, (hw, c, layers) in enumerate(chains)]
    return b.build([x for x, _ in ends], [y for _, y in ends])


def mobilenet_layers(width: float = 0.25, blocks: int = 13) -> list[Layer]:
    """MobileNetV1's layers at width `width`: a 3x3/2 conv, then depthwise-separable blocks (SAME padding)."""
    ch = [int(c * width) for c in (32, 64, 128, 128, 256, 256, 512, 512, 512, 512, 512, 512, 1024, 1024)]
    strides = (1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1)
    layers: list[Layer] = [("conv", ch[0], 3, 2, 1, 0)]
    for i in range(blocks):
        layers += [("dw", 0, 3, strides[i], 1, 0), ("conv", ch[i + 1], 1, 1, 1, 0)]
    return layers


def mobilenet_tflite(seed: int = 0, size: int = 96, width: float = 0.25, blocks: int = 13,
                     classes: int = 10) -> bytes:
    """A MobileNetV1-style int8 model: size x size x 3 input, depthwise-separable blocks, width `width`."""
    return stack_tflite(np.random.default_rng(seed), (size, size), 3, mobilenet_layers(width, blocks), head=classes)


def random_input(graph: Graph, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {n: rng.integers(-128, 128, graph.tensor(n).shape).astype(graph.tensor(n).dtype) for n in graph.inputs}


def random_layers(rng: np.random.Generator, h: int, w: int, c: int) -> list[Layer]:
    """2 to 4 random spatial layers that fit an h x w map: conv / depthwise (kernel 1, 2, 3 or 5, stride 1 or 2,
    dilation 1 or 2, SAME or VALID) and max / average pools (2 or 3, stride 1 or 2)."""
    layers: list[Layer] = []
    for _ in range(int(rng.integers(2, 5))):
        kind = str(rng.choice(["conv", "dw", "dw", "max", "avg"]))
        k = int(rng.choice([1, 2, 3, 3, 5])) if kind in ("conv", "dw") else int(rng.choice([2, 3]))
        s = int(rng.choice([1, 1, 2]))
        d = int(rng.choice([1, 1, 2])) if kind in ("conv", "dw") and k > 1 else 1
        pad = int(rng.integers(0, 2))
        if pad == 1 and (_out(h, k, s, d, 1) < 1 or _out(w, k, s, d, 1) < 1):
            pad = 0
        c_out = int(rng.integers(1, 7)) if kind == "conv" else c
        layers.append((kind, c_out, k, s, d, pad))
        h, w, c = _out(h, k, s, d, pad), _out(w, k, s, d, pad), c_out
    return layers


def _graph(model: bytes) -> Graph:
    from utvm.compiler.driver import run_passes

    return run_passes(from_tflite(model))[0]


def test_rows_need_gives_the_halo_and_the_padding_at_the_image_border_only() -> None:
    r = patch.Rows(kernel=3, stride=2, dilation=1, pad_top=1, in_rows=9, out_rows=5)
    assert r.need(0, 2) == (0, 4, 1, 0)  # rows -1..3: the top padding row is the patch's
    assert r.need(2, 4) == (3, 8, 0, 0)  # an interior patch: halo rows, no padding
    assert r.need(4, 5) == (7, 9, 0, 1)  # rows 7, 8, 9: row 9 is past the bottom, the patch pads it
    d = patch.Rows(kernel=3, stride=1, dilation=2, pad_top=2, in_rows=6, out_rows=6)
    assert d.need(5, 6) == (3, 6, 0, 2)  # rows 3, 5, 7: row 7 is past the bottom


def test_row_schedule_computes_each_row_once_and_keeps_the_halo() -> None:
    rows = [patch.Rows(3, 2, 1, 1, 17, 9), patch.Rows(3, 1, 1, 1, 9, 9), patch.Rows(1, 1, 1, 0, 9, 9),
            patch.Rows(3, 2, 1, 0, 9, 4)]
    calls = patch.row_schedule(rows, 4, 1)
    assert calls is not None and calls[-1].patch == 4
    for t, r in enumerate(rows):
        spans = [c.out for c in calls if c.t == t]
        assert spans[0][0] == 0 and all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)), spans
        assert spans[-1][1] <= r.out_rows
    assert any(c.shift for c in calls) and all(c.keep is None for c in calls if c.t == 1)  # 1x1: nothing kept
    # each line buffer holds about one chunk and its halo, warm-up included: never the receptive field
    assert max(c.window[1] - c.window[0] for c in calls if c.t == 0) <= 4
    assert patch.row_schedule([patch.Rows(1, 1, 1, 5, 4, 13)], 13, 1) is None  # a row of padding only


@pytest.mark.parametrize("seed", range(40))
def test_a_random_stack_split_into_row_patches_equals_the_unsplit_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    h, w, c = int(rng.integers(7, 24)), int(rng.integers(3, 10)), int(rng.integers(1, 5))
    graph = _graph(stack_tflite(rng, (h, w), c, random_layers(rng, h, w, c)))
    chains = patch.chains(graph)
    assert chains and len(chains[0]) == len(graph.nodes)
    first = int(rng.integers(0, len(graph.nodes) - 1))
    last = int(rng.integers(first + 1, len(graph.nodes)))
    out_rows = graph.tensor(graph.nodes[last].outputs[0]).shape[1]
    if out_rows < 2:
        first, last = 0, len(graph.nodes) - 1
        out_rows = graph.tensor(graph.nodes[last].outputs[0]).shape[1]
    assert out_rows >= 2, f"seed {seed} draws no stage of two output rows or more"
    rows = int(rng.integers(1, max(2, out_rows // 2 + 1)))
    split = patch.rewrite(graph, patch.Plan((patch.Stage(first, last, rows),)))
    verify(split)
    n_patches = -(-out_rows // rows)
    seen = {tuple(patch.patch_of(split, nd) or ()) for nd in split.nodes}
    assert (n_patches, n_patches) in seen and (1, n_patches) in seen
    x = random_input(graph, rng)
    for rounding in ("single", "double"):
        want, got = run_reference(graph, x, rounding), run_reference(split, x, rounding)
        for name in graph.outputs:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"seed {seed}, {rounding}")


# --- the generated C: every convention, many stacks in one build ----------------------------------------------

C_STACKS: list[tuple[tuple[int, int], int, list[Layer]]] = [
    ((17, 6), 3, [("conv", 4, 3, 2, 1, 0), ("dw", 0, 3, 1, 1, 0), ("conv", 5, 1, 1, 1, 0), ("dw", 0, 3, 2, 1, 0)]),
    ((13, 5), 2, [("dw", 0, 3, 1, 2, 0), ("max", 0, 3, 2, 1, 1), ("conv", 3, 3, 1, 1, 0), ("avg", 0, 2, 1, 1, 0)]),
    ((15, 7), 4, [("conv", 6, 5, 1, 1, 0), ("dw", 0, 5, 2, 1, 1), ("conv", 2, 1, 1, 1, 0)]),
    ((11, 9), 3, [("avg", 0, 3, 1, 1, 0), ("conv", 4, 2, 2, 1, 0), ("dw", 0, 3, 1, 1, 0)]),
    # not a stage: an in-place depthwise between two convolutions
    ((9, 8), 3, [("conv", 6, 1, 1, 1, 0), ("dw", 0, 3, 1, 1, 0), ("conv", 3, 1, 1, 1, 0)]),
]


def stacks_case(seed: int = 7) -> tuple[Graph, Graph, dict[str, np.ndarray]]:
    """(graph, its rewrite, inputs): C_STACKS and six random stacks in one model, each but the fifth one stage
    (rows per patch 1 to 3), the fifth's depthwise in place."""
    rng = np.random.default_rng(seed)
    chains = list(C_STACKS)
    for _ in range(6):
        h, w, c = int(rng.integers(9, 20)), int(rng.integers(3, 9)), int(rng.integers(1, 5))
        chains.append(((h, w), c, random_layers(rng, h, w, c)))
    graph = _graph(stacks_tflite(rng, chains))
    starts = [i for i, nd in enumerate(graph.nodes) if nd.inputs[0] in graph.inputs]
    stages = []
    for k, a in enumerate(starts):
        last = a + len(chains[k][2]) - 1
        out_rows = graph.tensor(graph.nodes[last].outputs[0]).shape[1]
        if k != 4 and out_rows >= 2:
            stages.append(patch.Stage(a, last, int(rng.integers(1, min(3, out_rows // 2) + 1))))
    assert len(stages) >= 8
    dw = starts[4] + 1
    assert patch.inplace_ok(graph, dw)
    split = patch.rewrite(graph, patch.Plan(tuple(stages), (dw,)))
    x = random_input(graph, rng)
    return graph, split, x


@pytest.fixture(scope="module")
def stacks() -> tuple[Graph, Graph, dict[str, np.ndarray]]:
    return stacks_case()


@pytest.mark.parametrize("convention", [{}, {"unpacked_api": True},
                                        {"unpacked_api": True, "interface_api": "c", "workspace": "user"}],
                         ids=["packed", "unpacked", "c"])
def test_the_generated_c_of_row_patches_and_in_place_depthwise_is_bit_exact(
        stacks: tuple[Graph, Graph, dict[str, np.ndarray]], convention: dict) -> None:
    from utvm.compiler import compile as compile_graph
    from utvm.compiler.local import LocalModel

    graph, split, x = stacks
    want = run_reference(graph, x, "double")
    compiled = compile_graph(split, passes=False, rounding="double", **convention)
    plan = compiled.plan
    assert plan.inplace >= 1  # the depthwise writes over its input
    assert plan.views  # patches read the model inputs and write the model outputs in place
    ops = compiled.sources["tvmgen_default_ops.c"]
    assert "memmove(" in ops and "static int32_t tvmgen_default_patch_" in ops
    # views generate no code: one function per patch operator and per shift, none per slice view or concat
    assert len(compiled.operators) == sum(1 for nd in split.nodes if not nd.attrs.get(patch.VIEW))
    got = LocalModel(compiled, opt="-O0").run([x[n] for n in graph.inputs])
    for name, g in zip(graph.outputs, got, strict=True):
        np.testing.assert_array_equal(g, want[name], err_msg=f"{name}, {convention}")
    # the plan never places two live buffers over each other (memory.check) and the shifts write in place:
    # every shift's output is where its input starts
    for f in compiled.operators:
        if f.op == "slice":
            assert plan.locations[f.inputs[0].name] == plan.locations[f.outputs[0].name]
