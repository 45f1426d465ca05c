"""Every point of a kernel's schedule space is bit-exact: random workloads side by side in one graph (the
kernel tests' `Batch`), each node given its own point of its space, built once per target and run on the
host (LocalModel) or on a QEMU board over RPC (one firmware for the whole batch), compared with
utvm.ir.run_reference. `cover` checks that every value of every knob was exercised, so a test cannot pass
by never reaching a variant.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_harness import Batch, compare  # noqa: E402

from utvm.compiler import compile  # noqa: E402
from utvm.compiler.driver import CompiledModel  # noqa: E402
from utvm.compiler.kernels import KernelContext, get_space  # noqa: E402
from utvm.compiler.lower import fold_constant_aliases  # noqa: E402
from utvm.compiler.schedule import Schedule, Space  # noqa: E402
from utvm.ir import run_reference  # noqa: E402
from utvm.ir.graph import Graph  # noqa: E402


def spaces(graph: Graph, target: str, rounding: str) -> list[tuple[str, Space]]:
    """(task key, space) of each node of `graph`, in node order."""
    from utvm.compiler.kernels import FileScope

    graph = fold_constant_aliases(graph)
    out = []
    for i, node in enumerate(graph.nodes):
        ctx = KernelContext(node, i, graph, rounding, f"f{i}", FileScope("p"), {}, ["out0"], target)
        out.append((ctx.task_key(), get_space(ctx)))
    return out


def assign_points(graph: Graph, target: str, rounding: str, rng: np.random.Generator,
                  seen: dict[str, set[Any]], keep: Callable[[Schedule], bool] | None = None) -> dict[str, Schedule]:
    """One legal point per node's task, preferring knob values not `seen` yet (updated in place). With `keep`,
    only the points it accepts (e.g. one algorithm's); a task with none of those gets its default."""
    chosen: dict[str, Schedule] = {}
    for key, space in spaces(graph, target, rounding):
        if not space.knobs or key in chosen:
            continue
        points = [p for p in space.points() if keep is None or keep(p)]
        if keep is not None and not points:
            chosen[key] = space.default
            continue
        assert points, f"task {key}: no legal point"

        def novelty(p: Schedule) -> int:
            return sum(v not in seen.get(k, set()) for k, v in p.items())

        best = max(novelty(p) for p in points)
        pick = [p for p in points if novelty(p) == best]
        point = pick[int(rng.integers(len(pick)))]
        for k, v in point.items():
            seen.setdefault(k, set()).add(v)
        chosen[key] = point
    return chosen


def cover(seen: dict[str, set[Any]], graphs: Sequence[tuple[Graph, str]], target: str) -> None:
    """Every value a knob takes in some legal point of the spaces of `graphs` ((graph, rounding) pairs) was
    used at least once (a value legal nowhere here, e.g. a Thumb-2 form on the host, is not required)."""
    reachable: dict[str, set[Any]] = {}
    for graph, rounding in graphs:
        for _key, space in spaces(graph, target, rounding):
            for point in space.points():
                for k, v in point.items():
                    reachable.setdefault(k, set()).add(v)
    assert reachable, "no node of the batches has a schedule space"
    for name, values in reachable.items():
        missing = values - seen.get(name, set())
        assert not missing, f"knob {name} never took the values {sorted(map(str, missing))}"


def sweep(make_batch: Callable[[np.random.Generator], Batch], target: str, seed: int,
          run: Callable[[CompiledModel, list[np.ndarray]], Sequence[np.ndarray]],
          roundings: Sequence[str] = ("double", "single", "double"), **compile_kw: Any) -> None:
    """One batch per rounding, every node at a point not seen yet where possible, all checked bit-exact;
    then every reachable value of every knob must have been used (`cover`)."""
    rng = np.random.default_rng(seed)
    seen: dict[str, set[Any]] = {}
    graphs = []
    for rounding in roundings:
        b = make_batch(rng)
        check_batch(b, target, rounding, rng, seen, run, **compile_kw)
        graphs.append((b.graph(), rounding))
    cover(seen, graphs, target)


def check_batch(batch: Batch, target: str, rounding: str, rng: np.random.Generator, seen: dict[str, set[Any]],
                run: Callable[[CompiledModel, list[np.ndarray]], Sequence[np.ndarray]], **compile_kw: Any
                ) -> CompiledModel:
    """Give every node a point, compile for `target`, run with `run(compiled, inputs)` and compare every
    output with the reference bit for bit. Returns the compiled model (its metadata names the points)."""
    schedules = assign_points(batch.graph(), target, rounding, rng, seen)
    return check_points(batch, target, rounding, schedules, rng, run, **compile_kw)


def check_points(batch: Batch, target: str, rounding: str, schedules: dict[str, Schedule], rng: np.random.Generator,
                 run: Callable[[CompiledModel, list[np.ndarray]], Sequence[np.ndarray]], **compile_kw: Any
                 ) -> CompiledModel:
    """Compile `batch` for `target` with the given `schedules` (every node with a task gets its point), run with
    `run(compiled, inputs)` and compare every output with the reference bit for bit."""
    graph = batch.graph()
    compiled = compile(graph, passes=False, rounding=rounding, target=target, schedules=schedules, **compile_kw)
    for op in compiled.operators:
        if op.task:
            assert op.schedule_source == "given" and op.schedule == schedules[op.task], op
    inputs = batch.random_inputs(rng)
    ref = run_reference(graph, inputs, rounding=rounding)
    outs = run(compiled, [inputs[n] for n in graph.inputs])
    for op, name, got in zip(compiled.operators, graph.outputs, outs, strict=True):
        compare(f"{name} [{target} {rounding} schedule {op.schedule}]", got, ref[name])
    return compiled


def run_local(compiled: CompiledModel, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from utvm.compiler.local import LocalModel

    return LocalModel(compiled).run(inputs)


def run_on_platform(platform: str) -> Callable[[CompiledModel, list[np.ndarray]], list[np.ndarray]]:
    def run(compiled: CompiledModel, inputs: list[np.ndarray]) -> list[np.ndarray]:
        from utvm.evaluate import build_firmware, run_on_device
        from utvm.platform import get_platform

        firmware = build_firmware(compiled, platform)
        with get_platform(platform).start(firmware, reply_timeout_s=120.0) as session:
            outs, _ = run_on_device(session, compiled, inputs)
        return outs

    return run


#: the QEMU boards every point kind runs on: DSP (M4), portable Thumb-2 (M3), Helium MVE (M55)
QEMU_TARGETS = [("qemu-cortex-m4", "cortex-m4"), ("qemu-cortex-m3", "cortex-m3"), ("qemu-cortex-m55", "cortex-m55")]


def point_tests(make_batch: Callable[[np.random.Generator, int], Batch], *, host_nodes: int, sweep_nodes: int,
                sweep_seed: int, qemu_nodes: int, qemu_seed: int,
                qemu_roundings: Sequence[str] = ("double", "single", "double")) -> tuple[Callable[..., None], ...]:
    """The three tests every scheduled kernel family runs, for `make_batch(rng, n_nodes)`:

    - random points of random workloads on the host, both roundings (Hypothesis, 6 examples);
    - every portable knob value reached on the host (`sweep`);
    - every point kind on qemu-cortex-m4 (DSP), -m3 (portable) and -m55 (Helium MVE, and its DSP points), slow.

        (test_portable_points_on_the_host, test_every_portable_knob_value_is_reached_on_the_host,
         test_every_point_kind_on_qemu) = point_tests(make_batch, host_nodes=16, ...)
    """
    import pytest
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=6)
    @given(seed=st.integers(0, 2**32 - 1), rounding=st.sampled_from(["single", "double"]))
    def test_portable_points_on_the_host(seed: int, rounding: str) -> None:
        rng = np.random.default_rng(seed)
        check_batch(make_batch(rng, host_nodes), "host", rounding, rng, {}, run_local)

    def test_every_portable_knob_value_is_reached_on_the_host() -> None:
        sweep(lambda rng: make_batch(rng, sweep_nodes), "host", sweep_seed, run_local)

    @pytest.mark.slow
    @pytest.mark.parametrize("platform, target", QEMU_TARGETS)
    def test_every_point_kind_on_qemu(platform: str, target: str) -> None:
        sweep(lambda rng: make_batch(rng, qemu_nodes), target, qemu_seed, run_on_platform(platform),
              qemu_roundings, unpacked_api=False)

    return (test_portable_points_on_the_host, test_every_portable_knob_value_is_reached_on_the_host,
            test_every_point_kind_on_qemu)
