"""Single-op TFLite models checked against TensorFlow Lite Micro's own kernels (the `tflite-micro` package).

Every op test of the TFLM-parity work goes through `check_cases`: a list of `Case`s (a model built with
tests/tflite_builder.py, and optionally how to draw its inputs) is

1. imported with `utvm.frontend.from_tflite` (a failure names the case);
2. run by TFLM's interpreter on `n_sets` random input sets, all cases in one oracle subprocess (one
   interpreter per case, sets run in order without a reset: stateful ops stream, as on the device);
3. run by utvm's reference interpreter (`utvm.ir.run_reference`, rounding "double" = TFLM's): bit-exact for
   integer outputs, within `rtol` of the output's magnitude for float;
4. merged side by side into ONE graph (tensor names prefixed by the case index), compiled once per build of
   `builds` (convention, -O level), built with the strict warning flags, run on the host, and compared with
   TFLM the same way.

    from tflm_harness import Case, check_cases
    cases = [Case("abs-int8", build_abs("int8")), ...]
    check_cases(cases)                                     # host C, packed -O2 and C interface -O0
    check_cases(cases, platform="host")                    # also over RPC on the host device
    check_cases(sample, platform="qemu-cortex-m4")         # a sample on the emulated Cortex-M4

Inputs default to: the whole int8/int16/uint8 range, int32 in [-100, 100], bool at random, float32 in
[-3, 3]; a case can pass `inputs=lambda rng: [...]` (arrays in model input order) for ops with domains
(indices, LOG's positive inputs, ...), or `ranges={"x": (lo, hi)}` by input position.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "compiler"))

from kernel_harness import FLOAT_RTOL  # noqa: E402
from kernel_harness import compare as _compare  # noqa: E402

from utvm.compiler import compile  # noqa: E402
from utvm.compiler.local import LocalModel  # noqa: E402
from utvm.compiler.oracle import OracleError, reference_many  # noqa: E402
from utvm.frontend import from_tflite  # noqa: E402
from utvm.frontend.tflite import ImportQuirkWarning  # noqa: E402
from utvm.ir import run_reference  # noqa: E402
from utvm.ir.graph import Graph  # noqa: E402

CONVENTIONS = {
    "packed": {},
    "unpacked": {"unpacked_api": True},
    "c": {"unpacked_api": True, "interface_api": "c"},
}
DEFAULT_BUILDS: tuple[tuple[str, str], ...] = (("packed", "-O2"), ("c", "-O0"))


@dataclass
class Case:
    id: str
    model: bytes
    inputs: Callable[[np.random.Generator], list[np.ndarray]] | None = None
    ranges: dict[int, tuple[float, float]] = field(default_factory=dict)
    rtol: float = FLOAT_RTOL
    #: absolute tolerance for float outputs (default: rtol x the output's magnitude)
    atol: float | None = None


def default_input(rng: np.random.Generator, shape: Sequence[int], dtype: str,
                  lo_hi: tuple[float, float] | None = None) -> np.ndarray:
    if dtype == "float32":
        lo, hi = lo_hi or (-3.0, 3.0)
        return rng.uniform(lo, hi, size=shape).astype(np.float32)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    info = np.iinfo(np.dtype(dtype))
    lo, hi = lo_hi or ((-100, 100) if dtype in ("int32", "int64") else (info.min, info.max))
    return rng.integers(max(int(lo), info.min), min(int(hi), info.max) + 1, size=shape).astype(dtype)


def _inputs(case: Case, graph: Graph, rng: np.random.Generator) -> list[np.ndarray]:
    if case.inputs is not None:
        arrays = [np.asarray(a) for a in case.inputs(rng)]
        assert len(arrays) == len(graph.inputs), f"{case.id}: {len(arrays)} inputs for {len(graph.inputs)}"
        return arrays
    return [default_input(rng, graph.tensors[n].shape, graph.tensors[n].dtype, case.ranges.get(i))
            for i, n in enumerate(graph.inputs)]


def compare(what: str, got: np.ndarray, want: np.ndarray, rtol: float = FLOAT_RTOL, atol: float | None = None) -> None:
    """kernel_harness.compare against TFLM: bit-exact for integers and bools, float within rtol (NaN equals NaN)."""
    _compare(what, np.asarray(got), np.asarray(want), rtol, atol, ref="TFLM")


def merge(graphs: Sequence[tuple[str, Graph]]) -> Graph:
    """Independent graphs side by side in one: every tensor and node renamed `<prefix>_<name>`."""
    tensors, nodes, inputs, outputs = {}, [], [], []
    for prefix, g in graphs:
        def rn(name: str, p: str = prefix) -> str:
            return f"{p}_{name}" if name else name

        for t in g.tensors.values():
            tensors[rn(t.name)] = t.replace(name=rn(t.name))
        nodes += [n.replace(inputs=tuple(rn(x) for x in n.inputs), outputs=tuple(rn(y) for y in n.outputs),
                            name=rn(n.name or n.op)) for n in g.nodes]
        inputs += [rn(x) for x in g.inputs]
        outputs += [rn(y) for y in g.outputs]
    return Graph(tensors, tuple(nodes), tuple(inputs), tuple(outputs), "merged")


@dataclass
class Prepared:
    case: Case
    graph: Graph
    sets: list[list[np.ndarray]]
    expected: list[list[np.ndarray]]


def prepare(cases: Sequence[Case], *, seed: int = 2026, n_sets: int = 2) -> list[Prepared]:
    """Import every case and run TFLM on its input sets (one oracle subprocess for all)."""
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids), f"duplicate case ids: {sorted({i for i in ids if ids.count(i) > 1})}"
    rng = np.random.default_rng(seed)
    graphs, sets = [], []
    for case in cases:
        try:
            with warnings.catch_warnings():  # import quirks are tested where they are the subject
                warnings.simplefilter("ignore", ImportQuirkWarning)
                g = from_tflite(case.model, name="m")
        except Exception as exc:
            raise AssertionError(f"{case.id}: import failed: {type(exc).__name__}: {exc}") from exc
        graphs.append(g)
        sets.append([_inputs(case, g, rng) for _ in range(n_sets)])
    results = reference_many([(c.model, s) for c, s in zip(cases, sets, strict=True)], kind="tflm")
    out = []
    for case, g, s, r in zip(cases, graphs, sets, results, strict=True):
        if isinstance(r, OracleError):
            raise AssertionError(f"{case.id}: TFLM failed on the model: {r}")
        out.append(Prepared(case, g, s, r))
    return out


def check_reference(prepared: Sequence[Prepared], rounding: str = "double") -> None:
    """utvm's reference interpreter against TFLM, case by case."""
    for p in prepared:
        state: dict[str, list[np.ndarray]] = {}  # stateful ops stream from set to set, as TFLM and the device
        for k, (s, want) in enumerate(zip(p.sets, p.expected, strict=True)):
            ref = run_reference(p.graph, dict(zip(p.graph.inputs, s, strict=True)), rounding=rounding, state=state)
            for name, w in zip(p.graph.outputs, want, strict=True):
                compare(f"{p.case.id}: reference interpreter, output {name!r} (input set {k})", ref[name], w,
                        p.case.rtol, p.case.atol)


def _check_outputs(prepared: Sequence[Prepared], outs: Sequence[np.ndarray], k: int, how: str) -> None:
    pos = 0
    for p in prepared:
        for name, want in zip(p.graph.outputs, p.expected[k], strict=True):
            compare(f"{p.case.id}: {how}, output {name!r} (input set {k})", outs[pos], want, p.case.rtol, p.case.atol)
            pos += 1
    assert pos == len(outs)


def check_cases(cases: Sequence[Case], *, seed: int = 2026, n_sets: int = 2, rounding: str = "double",
                builds: Sequence[tuple[str, str]] = DEFAULT_BUILDS, reference: bool = True,
                platform: str | None = None, passes: bool = True) -> list[Prepared]:
    """The whole check (see the module docstring); `platform` adds a run over RPC on that platform."""
    prepared = prepare(cases, seed=seed, n_sets=n_sets)
    if reference:
        check_reference(prepared, rounding)
    graph = merge([(f"c{i}", p.graph) for i, p in enumerate(prepared)])
    for convention, opt in builds:
        compiled = compile(graph, passes=passes, rounding=rounding, **CONVENTIONS[convention])
        model = LocalModel(compiled, opt=opt)
        for k in range(n_sets):
            outs = model.run([x for p in prepared for x in p.sets[k]])
            _check_outputs(prepared, outs, k, f"generated C ({convention} {opt})")
    if platform is not None:
        run_on_platform(prepared, graph, platform, rounding, passes)
    return prepared


def run_on_platform(prepared: Sequence[Prepared], graph: Graph, platform: str, rounding: str = "double",
                    passes: bool = True) -> None:
    """The merged graph as evaluation firmware on `platform`, run over RPC, compared with TFLM."""
    from utvm import evaluate
    from utvm.platform import get_platform
    from utvm.target import platform_target

    compiled = compile(graph, passes=passes, rounding=rounding, target=platform_target(platform))
    firmware = evaluate.build_firmware(compiled, platform)
    with get_platform(platform).start(firmware) as session:
        for k in range(len(prepared[0].sets)):
            outs, _ = evaluate.run_on_device(session, compiled, [x for p in prepared for x in p.sets[k]])
            _check_outputs(prepared, outs, k, f"over RPC on {platform}")
