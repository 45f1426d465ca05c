"""Layer-by-layer debugging: run a model operator by operator on the device and compare every intermediate.

    import utvm
    res = utvm.debug_layers("kws_ref_model.tflite", platform="host", seed=1)
    res.tensors["conv1_out"]            # every tensor the device computed, in execution order (numpy)
    res.first_mismatch                  # the first LayerComparison that differs, or None
    print(format_layers(res))           # the per-operator table `utvm run --debug-layers` prints

The firmware is the evaluation firmware with every operator function callable over RPC in any calling
convention (`build_firmware(..., debug=True)`: in the unpacked and C conventions a packed wrapper per
operator, firmware only, see utvm.compiler.debug). The host walks the compiled graph in order: for each
operator function it uploads the operator's inputs (the model inputs, or what earlier operators computed
on the device), gives it fresh output and scratch arrays (and a zeroed state block, as after boot), calls it
and downloads its outputs. Each operator works on its own arrays, never inside the planned workspace, so
the result does not depend on the memory plan. Reshape aliases (no code of their own) are the bytes of
their input. Every output is compared with utvm's reference interpreter's value of the same tensor
(`utvm.ir.run_reference(..., intermediates=True)` on the compiled graph): integers must be equal, floats
within FLOAT_TOLERANCE of the reference's magnitude (as `utvm run --check`); NaN equals NaN. Since the
device's own values flow into the next operators, the first operator that differs is the one at fault;
those after it usually differ too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from utvm.errors import ModelError, OracleError, UsageError, UtvmError
from utvm.evaluate import differences


@dataclass(frozen=True)
class LayerComparison:
    """One output tensor of one operator function, device against reference."""

    index: int  # the operator's position in execution order (0-based)
    function: str  # the generated function (tvmgen_<m>_<op>)
    op: str
    node: str  # the graph node it came from
    tensor: str
    dtype: str
    shape: tuple[int, ...]
    max_abs_diff: float  # over the elements both have finite; inf when a NaN/infinity is on one side only
    n_diff: int  # differing elements (outside the float tolerance; any difference for integers)
    first_diff: tuple[int, ...] | None  # multi-dimensional index of the first differing element

    @property
    def ok(self) -> bool:
        return self.n_diff == 0

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "function": self.function, "op": self.op, "node": self.node,
                "tensor": self.tensor, "dtype": self.dtype, "shape": list(self.shape),
                "max_abs_diff": self.max_abs_diff, "n_diff": self.n_diff,
                "first_diff": None if self.first_diff is None else list(self.first_diff), "ok": self.ok}


@dataclass
class LayerDebugResult:
    """What `debug_layers` found: the device's tensors, the reference's, and one comparison per output."""

    tensors: dict[str, np.ndarray]  # every tensor computed on the device, in execution order
    reference: dict[str, np.ndarray]  # the reference interpreter's value of every computed tensor
    layers: list[LayerComparison] = field(default_factory=list)
    inputs: list[np.ndarray] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.layers)

    @property
    def first_mismatch(self) -> LayerComparison | None:
        return next((c for c in self.layers if not c.ok), None)

    @property
    def n_operators(self) -> int:
        return len({c.index for c in self.layers})

    def to_json(self) -> dict[str, Any]:
        first = self.first_mismatch
        return {"layers": [c.to_json() for c in self.layers], "operators": self.n_operators, "ok": self.ok,
                "first_mismatch": None if first is None else first.to_json()}


def compare_tensor(got: np.ndarray, want: np.ndarray) -> tuple[float, int, tuple[int, ...] | None]:
    """(max abs difference, number of differing elements, index of the first) of `got` against `want`;
    floats differ beyond FLOAT_TOLERANCE relative to the reference's magnitude, NaN equals NaN."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise ValueError(f"shape {list(got.shape)} against the reference's {list(want.shape)}")
    differs, max_abs = differences(got, want)
    flat = np.flatnonzero(differs)
    first = tuple(int(i) for i in np.unravel_index(int(flat[0]), got.shape)) if flat.size else None
    return max_abs, int(flat.size), first


def _as_compiled(model_or_compiled: Any, compile_options: Mapping[str, Any]) -> Any:
    from utvm.compiler.driver import CompiledModel

    if isinstance(model_or_compiled, CompiledModel):
        if compile_options:
            raise UsageError("debug_layers: compile options apply to a model file, not to a compiled model")
        return model_or_compiled
    from utvm.evaluate import is_mlf

    path = Path(model_or_compiled)
    if not path.exists():
        raise UsageError(f"{path}: no such model or MLF")
    if is_mlf(path):
        from utvm import mlf

        return mlf.load(path)
    from utvm.compiler import compile as compile_graph
    from utvm.frontend import load

    return compile_graph(load(path), **dict(compile_options))


def _input_list(compiled: Any, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray] | None,
                seed: int) -> list[np.ndarray]:
    from utvm.evaluate import read_inputs

    iface = compiled.interface
    if inputs is None:
        return read_inputs(compiled, {}, seed)
    if isinstance(inputs, Mapping):
        unknown = [k for k in inputs if k not in {x.name for x in iface.inputs}]
        if unknown:
            raise UsageError(f"debug_layers: the model has no input {unknown[0]!r}; inputs: "
                             f"{', '.join(x.name for x in iface.inputs)}")
        missing = [x.name for x in iface.inputs if x.name not in inputs]
        if missing:
            raise UsageError(f"debug_layers: no value for the input {missing[0]!r}")
        inputs = [inputs[x.name] for x in iface.inputs]
    if len(inputs) != len(iface.inputs):
        raise UsageError(f"debug_layers: the model takes {len(iface.inputs)} input(s), got {len(inputs)}")
    out = []
    for x, a in zip(iface.inputs, inputs, strict=True):
        a = np.asarray(a)
        if str(a.dtype) != x.dtype or tuple(a.shape) != tuple(x.shape):
            raise UsageError(f"debug_layers: input {x.name!r} must be {x.dtype}{list(x.shape)}, got "
                             f"{a.dtype}{list(a.shape)}")
        out.append(np.asarray(a, order="C"))  # a scalar input stays 0-d
    return out


def run_layers(session: Any, compiled: Any, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Run `compiled` operator by operator on the device of `session` (firmware from
    `build_firmware(compiled, debug=True)`); every tensor the device computed, in execution order."""
    from utvm.compiler.kernels import is_alias_op

    graph = compiled.graph
    mod = session.system_lib(compiled.model_name)  # its own module, also beside other models
    env: dict[str, np.ndarray] = {name: np.asarray(a) for name, a in zip(graph.inputs, inputs, strict=True)}
    computed: dict[str, np.ndarray] = {}
    by_node = {op.node: op for op in compiled.operators}
    for i, node in enumerate(graph.nodes):
        op = by_node.get(node.label(i))
        if op is None:
            src = node.inputs[0] if node.inputs else ""
            if not (is_alias_op(node.op) and len(node.outputs) == 1 and src):
                raise ModelError(f"{node.label(i)} has no operator function and is no reshape alias; "
                                 "it cannot be run layer by layer")
            t = graph.tensor(node.outputs[0])
            base = env[src] if src in env else graph.tensor(src).data
            if base is None:
                raise ModelError(f"{node.label(i)}: its input {src!r} has no value yet")
            value = np.frombuffer(np.ascontiguousarray(base).tobytes(), dtype=t.dtype).reshape(t.shape)
            env[node.outputs[0]] = computed[node.outputs[0]] = value
            continue
        func = mod.get_function(op.name, allow_missing=True)
        if func is None:
            raise UsageError(f"{op.node}: {op.name!r} is not in the firmware's system library (convention "
                             f"{compiled.options.convention!r}); build it with build_firmware(..., debug=True)")
        arrays = []
        try:
            for k, t in enumerate(op.args):
                if k < len(op.inputs):
                    if t.name not in env:
                        raise ModelError(f"{op.node}: its input {t.name!r} was not computed before it")
                    arrays.append(session.array(np.asarray(env[t.name], dtype=t.dtype, order="C")))
                elif op.persistent_bytes and k == len(op.args) - 1:  # state: zeroed, as after boot
                    arrays.append(session.array(np.zeros(t.shape, dtype=t.dtype)))
                else:
                    arrays.append(session.empty(t.shape, t.dtype))
            func(*arrays)
            for k, t in enumerate(op.outputs):
                env[t.name] = computed[t.name] = arrays[len(op.inputs) + k].numpy()
        finally:
            for a in arrays:
                a.free()
    return computed


def compare_layers(compiled: Any, tensors: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray]
                   ) -> list[LayerComparison]:
    """One LayerComparison per output of every operator function, in execution order."""
    rows = []
    for index, op in enumerate(compiled.operators):
        for t in op.outputs:
            if t.name not in reference:
                raise OracleError(f"{op.node}: utvm's reference interpreter computed no {t.name!r}")
            try:
                max_abs, n_diff, first = compare_tensor(tensors[t.name], reference[t.name])
            except ValueError as exc:
                raise OracleError(f"{op.node}: output {t.name!r}: {exc}") from exc
            rows.append(LayerComparison(index, op.name, op.op, op.node, t.name, t.dtype, tuple(t.shape), max_abs,
                                        n_diff, first))
    return rows


def debug_layers(
    model_or_compiled: Any,
    inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray] | None = None,
    platform: str = "host",
    *,
    seed: int = 0,
    session: Any = None,
    timeout_s: float = 60.0,
    compile_options: Mapping[str, Any] | None = None,
) -> LayerDebugResult:
    """Run a model operator by operator on `platform` and compare every intermediate with the reference.

    `model_or_compiled`: a CompiledModel, an MLF (tar or directory) or a .tflite/.onnx file (compiled with
    `compile_options`, keyword arguments of utvm.compiler.compile: e.g. {"unpacked_api": True}). `inputs`:
    the model's inputs in order or by name, else random ones from `seed` (as `utvm run`). `session`: an
    already started session on firmware from `build_firmware(compiled, platform, debug=True)`; else that
    firmware is built and started on `platform` (every call bounded by `timeout_s`).

    Returns a LayerDebugResult: `.tensors`, an ordered mapping of every tensor the device computed (name ->
    numpy array), `.reference` the reference interpreter's, `.layers` one LayerComparison per operator
    output, `.first_mismatch` the first that differs (None when all match).
    """
    from utvm.evaluate import build_firmware
    from utvm.ir import run_reference

    compiled = _as_compiled(model_or_compiled, compile_options or {})
    ins = _input_list(compiled, inputs, seed)
    graph = compiled.graph
    try:
        reference = run_reference(graph, dict(zip(graph.inputs, ins, strict=True)),
                                  rounding=compiled.options.rounding, intermediates=True)
    except (UtvmError, ValueError, ArithmeticError) as exc:
        if isinstance(exc, UsageError):
            raise
        raise OracleError(f"utvm's reference interpreter failed on {compiled.model_name}: {exc}") from exc
    if session is not None:
        tensors = run_layers(session, compiled, ins)
    else:
        from utvm.platform import get_platform

        firmware = build_firmware(compiled, platform, debug=True)
        with get_platform(platform).start(firmware, reply_timeout_s=timeout_s) as sess:
            tensors = run_layers(sess, compiled, ins)
    return LayerDebugResult(tensors, dict(reference), compare_layers(compiled, tensors, reference), ins)


def format_layers(result: LayerDebugResult) -> str:
    """The per-operator table, then the first operator that differs (or that all match). Names from the
    model are escaped (utvm.support.text.shown): a tensor name cannot split a row or drive the terminal."""
    from utvm.support.text import shown

    rows = result.layers

    def fmt(c: LayerComparison) -> list[str]:
        return [str(c.index), shown(c.function), shown(c.op), shown(c.tensor), f"{c.max_abs_diff:.6g}",
                str(c.n_diff), "-" if c.first_diff is None else str(list(c.first_diff))]

    head = ["#", "function", "op", "output tensor", "max abs diff", "differing", "first at"]
    cells = [fmt(c) for c in rows]
    widths = [max(len(h), *(len(r[k]) for r in cells)) if cells else len(h) for k, h in enumerate(head)]
    right = {0, 4, 5}

    def line(r: list[str]) -> str:
        return "  ".join(v.rjust(w) if k in right else v.ljust(w) for k, (v, w) in enumerate(zip(r, widths,
                                                                                                  strict=True))
                         ).rstrip()

    out = [line(head), "-" * len(line(head)), *(line(r) for r in cells), ""]
    first = result.first_mismatch
    if first is None:
        out.append(f"all {result.n_operators} operators match the reference")
    else:
        size = math.prod(first.shape)
        out.append(f"first difference: operator {first.index} {shown(first.function)} ({shown(first.op)}, "
                   f"{shown(first.node)}), output {shown(repr(first.tensor))} {first.dtype}{list(first.shape)}: "
                   f"{first.n_diff} of {size} "
                   f"element(s) differ, max abs difference {first.max_abs_diff:.6g}, first at index "
                   f"{list(first.first_diff or ())}")
    return "\n".join(out)
