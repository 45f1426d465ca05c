"""utvm.compiler.fit.lower_within: schedules chosen so that the workspace stays within a peak (docs/kernels.md
§12). On random chains of int8 convolutions, depthwise convolutions and dense layers for Cortex-M4 (whose
kernels ask for scratch): the workspace never exceeds an explicit limit, a limit below the least reachable peak
is refused naming that peak, the fastest fitting point is taken, only the layers at the peak change, a tuning
log's schedules stand without a limit, and without one the build moves towards the portable peak within its
speed budget (or reaches it when told to at any cost). Lowering only: no C is built.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import Batch, int8_weights, per_channel, per_tensor, scales  # noqa: E402

from utvm.compiler import memory  # noqa: E402
from utvm.compiler.fit import DEFAULT_MAX_SLOWDOWN, MemoryLimitError, lower_within, portable_peak  # noqa: E402
from utvm.compiler.kernels import get_space  # noqa: E402
from utvm.compiler.lower import Lowered, kernel_contexts, lower  # noqa: E402
from utvm.ir.graph import Graph  # noqa: E402

TARGET = "cortex-m4"


def _q(rng: np.random.Generator, scale: float = 0.05) -> object:
    return per_tensor(scale, int(rng.integers(-100, 100)))


def conv(b: Batch, rng: np.random.Generator, x: str, name: str, oc: int, k: int, stride: int = 1) -> str:
    c = b.tensors[x].shape[3]
    wq = per_channel(scales(rng, oc), 0)
    w = b.const(f"{name}_w", int8_weights(rng, (oc, k, k, c)), wq)
    bias = b.const(f"{name}_b", rng.integers(-2000, 2000, size=oc).astype(np.int32),
                   per_channel(list(0.05 * np.asarray(wq.scale)), 0))
    p = k // 2
    return b.apply("conv2d", [x, w, bias], name, {"strides": (stride, stride), "dilation": (1, 1),
                                                  "padding": (p, p, k - 1 - p, k - 1 - p), "groups": 1,
                                                  "activation": "relu"}, _q(rng, 0.1))


def depthwise(b: Batch, rng: np.random.Generator, x: str, name: str, k: int, stride: int = 1) -> str:
    c = b.tensors[x].shape[3]
    wq = per_channel(scales(rng, c), 3)
    w = b.const(f"{name}_w", int8_weights(rng, (1, k, k, c)), wq)
    bias = b.const(f"{name}_b", rng.integers(-2000, 2000, size=c).astype(np.int32),
                   per_channel(list(0.05 * np.asarray(wq.scale)), 0))
    p = k // 2
    return b.apply("depthwise_conv2d", [x, w, bias], name, {"strides": (stride, stride), "dilation": (1, 1),
                                                            "padding": (p, p, k - 1 - p, k - 1 - p),
                                                            "depth_multiplier": 1, "activation": "relu6"},
                   _q(rng, 0.1))


def dense(b: Batch, rng: np.random.Generator, x: str, name: str, units: int) -> str:
    shape = b.tensors[x].shape
    k = int(np.prod(shape[1:]))
    if len(shape) != 2:
        flat = b.tensor(f"{name}_flat", (1, k), "int8", b.tensors[x].quant)
        b.op("reshape", [x], flat, {"shape": (1, k)})
        x = flat
    ws = float(scales(rng, 1)[0])
    w = b.const(f"{name}_w", int8_weights(rng, (units, k)), per_tensor(ws, 0))
    return b.apply("dense", [x, w], name, {"activation": "none"}, _q(rng, 0.2))


def chain(seed: int) -> Graph:
    """A random conv -> depthwise -> 1x1 conv (-> depthwise) -> dense chain: only its last tensor is an output."""
    rng = np.random.default_rng(seed)
    b = Batch()
    h, w = int(rng.integers(8, 20)), int(rng.integers(6, 16))
    x = b.input("x", (1, h, w, int(rng.choice([1, 3, 4]))), "int8", _q(rng))
    c = int(rng.choice([4, 8, 12, 16]))
    y = conv(b, rng, x, "c0", c, int(rng.choice([3, 5])), int(rng.integers(1, 3)))
    y = depthwise(b, rng, y, "d0", 3)
    y = conv(b, rng, y, "c1", c, 1)
    if rng.random() < 0.5:
        y = depthwise(b, rng, y, "d1", int(rng.choice([3, 5])), int(rng.integers(1, 3)))
    y = dense(b, rng, y, "fc", int(rng.choice([4, 10])))
    b.outputs = [y]
    return b.graph()


def scratch_of(lw: Lowered) -> dict[str, int]:
    return {f.node.outputs[0]: f.code.scratch_bytes for f in lw.funcs}


@pytest.mark.parametrize("seed", range(6))
def test_the_workspace_never_exceeds_the_limit(seed: int) -> None:
    graph = chain(seed)
    base = lower(graph, "m", "double", target=TARGET)
    least = portable_peak(graph, "m", "double", target=TARGET)
    assert least <= base.plan.workspace_bytes
    rng = np.random.default_rng(seed)
    limits = {least, base.plan.workspace_bytes, base.plan.workspace_bytes + 64,
              *(int(v) for v in rng.integers(least, base.plan.workspace_bytes + 1, size=3))}
    for limit in sorted(limits):
        lw = lower_within(graph, "m", "double", target=TARGET, peak_limit=limit)
        assert lw.plan.workspace_bytes <= limit, (seed, limit)
        if base.plan.workspace_bytes <= limit:  # the default build fits: it is the build
            assert [f.schedule for f in lw.funcs] == [f.schedule for f in base.funcs]
    if least > 0:
        with pytest.raises(MemoryLimitError) as err:
            lower_within(graph, "m", "double", target=TARGET, peak_limit=least - 1)
        assert err.value.smallest == least and f"{least:,} bytes" in str(err.value)


def single_depthwise() -> Graph:
    """One depthwise layer between the model's input and output: the workspace is its scratch alone."""
    rng = np.random.default_rng(7)
    b = Batch()
    x = b.input("x", (1, 23, 13, 8), "int8", _q(rng))
    b.outputs = [depthwise(b, rng, x, "dw", 3)]
    return b.graph()


@pytest.mark.parametrize("limit", [0, 100, 300, 700, 1500])
def test_the_fastest_point_that_fits_is_taken(limit: int) -> None:
    graph = single_depthwise()
    ((ctx, space),) = [(c, get_space(c)) for c in kernel_contexts(graph, "m", "double", TARGET)]
    options = space.leaner(space.default)
    fitting = [o for o in options if (memory.align(o.scratch) if o.scratch else 0) <= limit]
    lw = lower_within(graph, "m", "double", target=TARGET, peak_limit=limit)
    (f,) = lw.funcs
    want = fitting[0].point if space.scratch(space.default) > limit else space.default
    assert f.schedule == want and lw.plan.workspace_bytes <= limit
    assert all(o.cost >= fitting[0].cost for o in fitting)


def test_only_the_layers_at_the_peak_change() -> None:
    """A 3x3 convolution whose step is far below the peak keeps its default (its columns in scratch) while the
    depthwise layer at the peak takes less scratch."""
    rng = np.random.default_rng(11)
    b = Batch()
    x = b.input("x", (1, 16, 12, 4), "int8", _q(rng))
    y = conv(b, rng, x, "c0", 4, 3)           # 768 bytes out (input external): far below the peak
    y = conv(b, rng, y, "c1", 16, 1)          # 3 KB
    y = depthwise(b, rng, y, "d0", 3)         # 3 KB in, 3 KB out: the peak, plus its planes
    y = conv(b, rng, y, "c2", 4, 1)
    b.outputs = [y]
    graph = b.graph()
    base = lower(graph, "m", "double", target=TARGET)
    before = scratch_of(base)
    assert before["c0"] > 0 and before["d0"] > before["c0"]
    limit = base.plan.workspace_bytes - 16
    lw = lower_within(graph, "m", "double", target=TARGET, peak_limit=limit)
    after = scratch_of(lw)
    assert lw.plan.workspace_bytes <= limit and after["d0"] < before["d0"]
    assert after["c0"] == before["c0"] and [f.schedule for f in lw.funcs][0] == base.funcs[0].schedule
    assert {f.schedule_source for f in lw.funcs if f.task} == {"default"}  # the build's choice, not a log's


def test_a_tuning_logs_schedule_stands_without_a_limit_and_yields_to_one() -> None:
    graph = single_depthwise()
    ((ctx, space),) = [(c, get_space(c)) for c in kernel_contexts(graph, "m", "double", TARGET)]
    big = max(space.leaner(space.default), key=lambda o: o.scratch)
    given = {ctx.task_key(): big.point}
    kept = lower_within(graph, "m", "double", target=TARGET, schedules=given)
    assert kept.funcs[0].schedule == big.point and kept.funcs[0].schedule_source == "given"
    limit = big.scratch // 2
    moved = lower_within(graph, "m", "double", target=TARGET, schedules=given, peak_limit=limit)
    assert moved.plan.workspace_bytes <= limit and moved.funcs[0].schedule != big.point
    assert moved.funcs[0].schedule_source == "default"  # no longer the log's point


@pytest.mark.parametrize("seed", [1, 4])
def test_without_a_limit_the_build_moves_to_the_portable_peak_within_its_budget(seed: int) -> None:
    graph = chain(seed)
    base = lower(graph, "m", "double", target=TARGET)
    least = portable_peak(graph, "m", "double", target=TARGET)
    forced = lower_within(graph, "m", "double", target=TARGET, max_slowdown=None)
    assert forced.plan.workspace_bytes == least
    budgeted = lower_within(graph, "m", "double", target=TARGET)
    assert least <= budgeted.plan.workspace_bytes <= base.plan.workspace_bytes

    def estimate(lw: Lowered) -> float:
        total = 0.0
        skip = set(range(len(lw.graph.nodes))) - {f.node_index for f in lw.funcs}
        for ctx, f in zip(kernel_contexts(lw.graph, "m", "double", TARGET, skip), lw.funcs, strict=True):
            space = get_space(ctx)
            if space.cost is not None and f.schedule:
                total += space.cost(f.schedule)
        return total

    assert estimate(budgeted) <= estimate(base) * (1 + DEFAULT_MAX_SLOWDOWN) + 1e-6
    assert estimate(forced) >= estimate(budgeted)


# --- through utvm compile --memory-limit (patch.choose) ------------------------------------------------------------

@pytest.mark.parametrize("limit", [100, 300, 700, 1500])
def test_memory_limit_takes_the_fastest_point_that_fits_not_the_smallest(limit: int) -> None:
    """`compile(memory_limit=L)` asks the fit for L itself: the fastest point whose scratch fits, where going
    towards the portable peak would take a slower one with less scratch than L needs."""
    from utvm.compiler import compile as compile_graph

    graph = single_depthwise()
    ((ctx, space),) = [(c, get_space(c)) for c in kernel_contexts(graph, "m", "double", TARGET)]
    options = space.leaner(space.default)
    fitting = [o for o in options if (memory.align(o.scratch) if o.scratch else 0) <= limit]
    base = compile_graph(graph, passes=False, rounding="double", target=TARGET)
    if base.plan.workspace_bytes <= limit:
        pytest.fail(f"the default build's {base.plan.workspace_bytes} bytes fit {limit}: no choice is tested")
    c = compile_graph(graph, passes=False, rounding="double", target=TARGET, memory_limit=limit,
                      patch_overhead=10.0)
    (f,) = c.operators
    assert c.plan.workspace_bytes <= limit and f.schedule == fitting[0].point, (limit, f.schedule)


def test_memory_limit_moves_a_tuning_logs_schedule_when_the_defaults_cannot_fit() -> None:
    """A log's point of large scratch stands in the default build (the log allows it) and yields under
    `--memory-limit` when nothing else fits (docs/tuning.md)."""
    from utvm.compiler import compile as compile_graph

    graph = single_depthwise()
    ((ctx, space),) = [(c, get_space(c)) for c in kernel_contexts(graph, "m", "double", TARGET)]
    big = max(space.leaner(space.default), key=lambda o: o.scratch)
    given = {ctx.task_key(): big.point}
    kept = compile_graph(graph, passes=False, rounding="double", target=TARGET, schedules=given)
    assert kept.operators[0].schedule == big.point and kept.plan.workspace_bytes >= big.scratch
    limit = big.scratch // 2
    moved = compile_graph(graph, passes=False, rounding="double", target=TARGET, schedules=given,
                          memory_limit=limit, patch_overhead=10.0)
    assert moved.plan.workspace_bytes <= limit and moved.operators[0].schedule != big.point
    assert moved.operators[0].schedule_source == "default"
