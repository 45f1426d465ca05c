"""`utvm compile --memory-limit` (utvm.compiler.patch.choose): the peak never exceeds the limit, a limit too small
names the smallest peak reachable, the planner's figures and both memory timelines in metadata.json, the
in-place depthwise the plan picks, bit-exact locally, through an MLF, on the command line and on QEMU."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_patch import Layer, mobilenet_tflite, random_input, stack_tflite, stacks_case  # noqa: E402

from tflite_builder import TFLiteBuilder  # noqa: E402
from utvm.compiler import compile as compile_graph  # noqa: E402
from utvm.compiler import patch  # noqa: E402
from utvm.compiler.local import LocalModel  # noqa: E402
from utvm.errors import CompileError  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.ir import run_reference  # noqa: E402
from utvm.ir.graph import Graph  # noqa: E402

MODEL = mobilenet_tflite(seed=3, size=48, blocks=6)
SMALLEST = re.compile(r"the smallest peak reachable is (\d+) bytes")


def memory(compiled) -> dict:  # noqa: ANN001 - a CompiledModel
    return compiled.metadata["modules"][compiled.model_name]["memory"]


@pytest.fixture(scope="module")
def graph() -> Graph:
    return from_tflite(MODEL)


@pytest.fixture(scope="module")
def base(graph: Graph):  # noqa: ANN201
    return compile_graph(graph, unpacked_api=True)


@pytest.fixture(scope="module")
def smallest(graph: Graph):  # noqa: ANN201
    return compile_graph(graph, unpacked_api=True, interface_api="c", memory_limit="min")


def test_the_peak_never_exceeds_the_limit_and_a_limit_too_small_names_the_smallest_peak(graph: Graph, base,  # noqa: ANN001
                                                                                         smallest) -> None:
    bound = base.plan.lower_bound_bytes
    assert memory(base)["layer_by_layer_bound_bytes"] == bound == memory(base)["peak_bytes"]
    assert memory(base)["extra_macs"] == 0 and memory(base)["memory_aware"]["stages"] == []
    overheads = []
    for frac in (1.0, 0.7, 0.5):
        limit = int(frac * bound)
        c = compile_graph(graph, unpacked_api=True, memory_limit=limit)
        mem = memory(c)
        assert c.plan.workspace_bytes <= limit, frac
        assert mem["peak_bytes"] == c.plan.workspace_bytes and mem["layer_by_layer_bound_bytes"] == bound
        assert mem["extra_macs"] <= 0 < mem["memory_aware"]["model_macs"]  # halos are kept, never recomputed
        overheads.append(mem["memory_aware"].get("overhead", 0))
    assert overheads[0] == 0 and overheads == sorted(overheads)  # a lower limit never buys a cheaper plan
    low = smallest.plan.workspace_bytes
    assert low < 0.6 * bound
    for limit in (low - 1, 100):
        with pytest.raises(CompileError) as exc:
            compile_graph(graph, unpacked_api=True, memory_limit=limit)
        m = SMALLEST.search(str(exc.value))
        assert m and f"--memory-limit {limit} bytes" in str(exc.value) and f"bound {bound} bytes" in str(exc.value)
        assert int(m.group(1)) == low  # the smallest peak is reachable: --memory-limit min builds it
    assert compile_graph(graph, unpacked_api=True, memory_limit=low).plan.workspace_bytes <= low
    # without room for overhead, nothing below the layer-by-layer plan
    none = compile_graph(graph, unpacked_api=True, memory_limit="min", patch_overhead=0.0)
    assert none.plan.workspace_bytes == base.plan.workspace_bytes and memory(none)["memory_aware"]["stages"] == []


def test_metadata_carries_both_timelines(base, smallest) -> None:  # noqa: ANN001
    mem = memory(smallest)
    assert set(mem["timeline"]) == {"layer_by_layer", "plan"}
    for key, build_plan in (("plan", smallest.plan), ("layer_by_layer", None)):
        steps = mem["timeline"][key]
        assert all(set(s) == {"step", "function", "live", "patch"} for s in steps)
        assert [s["step"] for s in steps] == list(range(len(steps)))
        assert all(set(b) == {"buffer", "bytes"} for s in steps for b in s["live"])
        worst = max(sum(b["bytes"] for b in s["live"]) for s in steps)
        if build_plan is not None:
            assert [s["function"] for s in steps] == [op.name for op in smallest.operators]
            assert worst == build_plan.lower_bound_bytes
            ids = {b.id for b in build_plan.buffers}
            assert all(b["buffer"] in ids for s in steps for b in s["live"])
        else:
            assert worst == mem["layer_by_layer_bound_bytes"] == base.plan.lower_bound_bytes
            assert [s["function"] for s in steps] == [op.name for op in base.operators]
            assert all(s["patch"] is None for s in steps)
    patches = [s["patch"] for s in mem["timeline"]["plan"] if s["patch"] is not None]
    assert patches and all(1 <= k <= n for k, n in patches)
    assert len(mem["memory_aware"]["stages"]) >= 1 and mem["peak_bytes"] == smallest.plan.workspace_bytes
    json.dumps(mem)  # plain JSON
    # without --memory-limit both timelines are the layer-by-layer plan's
    assert memory(base)["timeline"]["plan"] == memory(base)["timeline"]["layer_by_layer"]


def test_the_memory_aware_build_is_bit_exact_and_survives_an_mlf(graph: Graph, smallest, tmp_path: Path) -> None:  # noqa: ANN001
    from utvm.mlf import export_model_library_format, load

    x = random_input(graph, np.random.default_rng(0))
    (got,) = LocalModel(smallest, opt="-O0").run([x[graph.inputs[0]]])
    np.testing.assert_array_equal(got, run_reference(graph, x)[graph.outputs[0]])
    back = load(export_model_library_format(smallest, tmp_path / "m.tar"))
    assert back.plan == smallest.plan and back.plan.views == smallest.plan.views
    assert memory(back) == json.loads(json.dumps(memory(smallest)))


def _inplace_model() -> bytes:
    """conv 1x1 -> logistic -> depthwise 3x3 -> logistic -> conv 1x1: no chain of two spatial operators, so only the
    depthwise in place brings the peak (its input and output, 16 channels) down."""
    rng = np.random.default_rng(5)
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 12, 10, 3), "int8", scale=0.05, zero_point=-2)

    def conv(src: int, shape: tuple, name: str, op: str, opts: str, **kw: int) -> int:
        n = shape[0] if op == "CONV_2D" else shape[3]
        ws = list(rng.uniform(0.005, 0.02, n))
        w = b.tensor(f"{name}_w", shape, "int8", data=rng.integers(-127, 128, shape), scale=ws, zero_point=0,
                     axis=0 if op == "CONV_2D" else 3)
        bias = b.tensor(f"{name}_b", (n,), "int32", data=rng.integers(-300, 300, n), scale=[0.05 * s for s in ws],
                        zero_point=0)
        y = b.tensor(name, (1, 12, 10, n), "int8", scale=0.1, zero_point=1)
        b.op(op, [src, w, bias], [y], opts, Padding=0, StrideH=1, StrideW=1, DilationHFactor=1, DilationWFactor=1,
             FusedActivationFunction=0, **kw)
        return y

    def logistic(src: int, name: str) -> int:
        y = b.tensor(name, (1, 12, 10, 16), "int8", scale=1 / 256, zero_point=-128)
        b.op("LOGISTIC", [src], [y])
        return y

    a = logistic(conv(x, (16, 1, 1, 3), "a", "CONV_2D", "Conv2DOptions"), "la")
    d = logistic(conv(a, (1, 3, 3, 16), "d", "DEPTHWISE_CONV_2D", "DepthwiseConv2DOptions", DepthMultiplier=1), "ld")
    y = conv(d, (4, 1, 1, 16), "y", "CONV_2D", "Conv2DOptions")
    return b.build([x], [y])


def test_the_plan_picks_the_in_place_depthwise_when_it_brings_the_peak_down() -> None:
    graph = from_tflite(_inplace_model())
    base = compile_graph(graph)
    # the portable in-place kernel costs about 4 instructions per MAC more than the registered one: a layer that
    # is most of this small model's work needs a large --patch-overhead
    c = compile_graph(graph, memory_limit=base.plan.workspace_bytes - 1, patch_overhead=5.0)
    mem = memory(c)
    assert mem["memory_aware"]["stages"] == [] and len(mem["memory_aware"]["inplace_nodes"]) == 1
    assert c.plan.inplace > base.plan.inplace and c.plan.workspace_bytes < base.plan.workspace_bytes
    dw = next(op for op in c.operators if op.op == "depthwise_conv2d")
    assert dw.inplace and dw.scratch_bytes == 14 * 12  # one channel, padded
    x = random_input(graph, np.random.default_rng(1))
    (got,) = LocalModel(c, opt="-O0").run([x["x"]])
    np.testing.assert_array_equal(got, run_reference(graph, x)["y"])


def test_the_command_line_reports_the_three_figures_and_refuses_a_limit_too_small(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from utvm.cli import main

    model = tmp_path / "mnv1.tflite"
    model.write_bytes(MODEL)
    assert main(["compile", str(model), "-o", str(tmp_path / "a.tar"), "--memory-limit", "min", "-q"]) == 0
    out = capsys.readouterr().out
    m = re.search(r"memory plan: peak (\d+) bytes, layer-by-layer bound (\d+) bytes, extra MACs (-?\d+) "
                  r"\((\d+) row-patch stages?", out)
    assert m and int(m.group(1)) < 0.6 * int(m.group(2)), out
    assert main(["compile", str(model), "-o", str(tmp_path / "b.tar"), "--memory-limit", "1K", "-q"]) == 5
    err = capsys.readouterr().err
    assert "--memory-limit 1024 bytes cannot be met" in err and f"reachable is {m.group(1)} bytes" in err
    for flag, value in (("--memory-limit", "lots"), ("--memory-limit", "0"), ("--patch-overhead", "ten")):
        assert main(["compile", str(model), "-o", str(tmp_path / "c.tar"), flag, value, "-q"]) == 2
        assert value in capsys.readouterr().err


@pytest.mark.slow
def test_row_patches_and_in_place_depthwise_on_qemu_cortex_m4() -> None:
    """The rewritten stacks of test_patch.py (views of model inputs and outputs, shifts, shared functions, an
    in-place depthwise) with the Cortex-M4's SIMD kernels, over RPC on QEMU, bit-exact."""
    from utvm import evaluate
    from utvm.platform import get_platform

    graph, split, x = stacks_case()
    compiled = compile_graph(split, passes=False, rounding="double", target="cortex-m4", unpacked_api=True,
                             interface_api="c")
    assert compiled.plan.views and compiled.plan.inplace
    firmware = evaluate.build_firmware(compiled, "qemu-cortex-m4")
    with get_platform("qemu-cortex-m4").start(firmware, handshake_retry_s=0.5, handshake_timeout_s=20.0,
                                              reply_timeout_s=60.0) as sess:
        got, _ = evaluate.run_on_device(sess, compiled, [x[n] for n in graph.inputs])
    want = run_reference(graph, x, "double")
    for name, g in zip(graph.outputs, got, strict=True):
        np.testing.assert_array_equal(g, want[name], err_msg=name)


def test_stage_candidates_cover_depthwise_separable_blocks() -> None:
    """A pointwise -> depthwise -> pointwise block is a stage of its own: computed row by row, its two
    intermediate buffers become line buffers."""
    layers: list[Layer] = [("conv", 16, 1, 1, 1, 0), ("dw", 0, 3, 1, 1, 0), ("conv", 16, 1, 1, 1, 0)]
    graph = from_tflite(stack_tflite(np.random.default_rng(2), (16, 12), 16, layers))
    planner = patch.Planner(graph)
    plan = planner.smallest(0.10)
    assert plan.stages and (plan.stages[0].first, plan.stages[0].last) == (0, 2)
    assert plan.peak_estimate < 0.5 * max(planner.live.step_bytes)
