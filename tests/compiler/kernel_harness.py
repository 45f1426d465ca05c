"""Shared machinery of the kernel tests (tests/compiler/test_kernels_*.py).

Many small single-op cases are put side by side in ONE graph (each with its own inputs and outputs, names
prefixed by the case id), so one C build covers a whole batch of configurations. The graph is compiled with
the driver (no passes: the op under test stays as built), built with the strict warning flags, run through
`LocalModel` and compared with `utvm.ir.run_reference`: bit-exact for integer outputs, within 1e-5 relative
(of the output's magnitude) for float.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from utvm.compiler import compile
from utvm.compiler.driver import CompiledModel
from utvm.compiler.local import LocalModel
from utvm.ir import run_reference
from utvm.ir.graph import Graph, Node, Quantization, Tensor
from utvm.ops import op_module
from utvm.support import cc

CONVENTIONS: dict[str, dict[str, Any]] = {
    "packed": {},
    "unpacked": {"unpacked_api": True},
    "c": {"unpacked_api": True, "interface_api": "c"},
}
# (convention, optimisation[, extra cflags]): the packed API at -O2 and the unpacked C interface at -O0.
DEFAULT_BUILDS: tuple[tuple, ...] = (("packed", "-O2"), ("c", "-O0"))
# Undefined behaviour (signed overflow, bad shifts, out-of-bounds table indices the compiler can see) traps.
UBSAN = ("-fsanitize=undefined", "-fsanitize-undefined-trap-on-error", "-fno-sanitize-recover=all")
FLOAT_RTOL = 1e-5


def per_tensor(scale: float, zero_point: int) -> Quantization:
    return Quantization((float(scale),), (int(zero_point),))


def per_channel(scales: Sequence[float], axis: int) -> Quantization:
    return Quantization(tuple(float(s) for s in scales), tuple(0 for _ in scales), axis)


@dataclass
class Batch:
    """A graph under construction: independent single-op cases side by side."""

    tensors: dict[str, Tensor] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)  # input -> value range

    def input(self, name: str, shape: Sequence[int], dtype: str, quant: Quantization | None = None,
              value_range: tuple[float, float] | None = None) -> str:
        self.tensors[name] = Tensor(name, tuple(int(d) for d in shape), dtype, quant)
        self.inputs.append(name)
        if value_range is not None:
            self.ranges[name] = value_range
        return name

    def const(self, name: str, data: np.ndarray, quant: Quantization | None = None) -> str:
        self.tensors[name] = Tensor(name, tuple(data.shape), str(data.dtype), quant, data)
        return name

    def tensor(self, name: str, shape: Sequence[int], dtype: str, quant: Quantization | None = None) -> str:
        self.tensors[name] = Tensor(name, tuple(int(d) for d in shape), dtype, quant)
        return name

    def op(self, op: str, inputs: Sequence[str], output: str, attrs: dict[str, Any] | None = None,
           *, is_output: bool = True) -> str:
        self.nodes.append(Node(op, tuple(inputs), (output,), attrs or {}, output))
        if is_output:
            self.outputs.append(output)
        return output

    def apply(self, op: str, inputs: Sequence[str], output: str, attrs: dict[str, Any] | None = None,
              quant: Quantization | None = None) -> str:
        """Add `op` with its output's shape and dtype from the op module's `infer`."""
        node = Node(op, tuple(inputs), (output,), attrs or {}, output)
        probe = Graph(self.tensors, (node,), (), ())
        ((shape, dtype),) = op_module(op).infer(node, probe)
        self.tensor(output, shape, dtype, quant)
        return self.op(op, inputs, output, attrs)

    def graph(self, name: str = "kernels") -> Graph:
        return Graph(self.tensors, self.nodes, tuple(self.inputs), tuple(self.outputs), name)

    def random_inputs(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        out = {}
        for name in self.inputs:
            t = self.tensors[name]
            lo, hi = self.ranges.get(name, (-128, 127) if t.dtype == "int8" else (-3.0, 3.0))
            if t.dtype == "float32":
                out[name] = rng.uniform(lo, hi, size=t.shape).astype(np.float32)
            else:
                info = np.iinfo(t.dtype)
                out[name] = rng.integers(max(int(lo), info.min), min(int(hi), info.max) + 1,
                                         size=t.shape).astype(t.dtype)
        return out


def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float = FLOAT_RTOL, atol: float | None = None,
            ref: str = "the reference") -> None:
    """Bit-exact for integers and bools; float within rtol of the larger of |want| and the tensor's magnitude
    (or within `atol`), NaN equal to NaN. `ref` names what `want` came from in the messages."""
    assert got.dtype == want.dtype and got.shape == want.shape, (
        f"output {name!r}: got {got.dtype}{list(got.shape)}, {ref} {want.dtype}{list(want.shape)}")
    if got.dtype.kind in "iub":
        bad = np.flatnonzero(got.ravel() != want.ravel())
        if bad.size:
            i = int(bad[0])
            raise AssertionError(f"output {name!r}: {bad.size} of {got.size} elements differ from {ref}; first at "
                                 f"flat index {i}: C {got.ravel()[i]} vs {ref} {want.ravel()[i]} "
                                 f"(indices {bad[:8].tolist()})")
        return
    scale = float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol if atol is not None else rtol * max(scale, 1e-30),
                               equal_nan=True, err_msg=f"output {name!r} differs from {ref}")


def run_batch(batch: Batch, rng: np.random.Generator, *, rounding: str = "single",
              builds: Sequence[tuple] = DEFAULT_BUILDS, n_sets: int = 2,
              rtol: float = FLOAT_RTOL) -> list[CompiledModel]:
    """Compile, build and run `batch` in each (convention, -O level) of `builds`; compare every output with
    the reference interpreter on `n_sets` random input sets. Returns the compiled models."""
    graph = batch.graph()
    sets = [batch.random_inputs(rng) for _ in range(n_sets)]
    refs = [run_reference(graph, s, rounding=rounding) for s in sets]
    compiled = []
    for convention, opt, *extra in builds:
        c = compile(graph, passes=False, rounding=rounding, **CONVENTIONS[convention])
        model = LocalModel(c, opt=opt, cflags=tuple(extra[0]) if extra else ())
        for s, ref in zip(sets, refs, strict=True):
            outs = model.run([s[n] for n in graph.inputs])
            for name, got in zip(graph.outputs, outs, strict=True):
                compare(f"{name} [{convention} {opt} rounding={rounding}]", got, ref[name], rtol)
        compiled.append(c)
    return compiled


def assert_spread(batch: Batch, rng: np.random.Generator, rounding: str = "single", min_distinct: int = 8) -> None:
    """Guard against vacuous int8 cases: every int8 output takes several distinct values on random input."""
    graph = batch.graph()
    ref = run_reference(graph, batch.random_inputs(rng), rounding=rounding)
    for name, y in ref.items():
        if y.dtype == np.int8 and y.size >= 4 * min_distinct:
            assert len(np.unique(y)) >= min_distinct, f"case {name!r} is degenerate: values {np.unique(y)}"


def ops_source(c: CompiledModel) -> str:
    return c.sources[f"{c.prefix}_ops.c"]


def assert_integer_only(c: CompiledModel) -> None:
    """int8 operator code uses no floating point and no libm: no float/double token, no <math.h>, and the
    operators file compiles with -mgeneral-regs-only where gcc supports it (no FP register may be used)."""
    src = ops_source(c)
    assert "#include <math.h>" not in src
    code = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    found = re.findall(r"\b(float|double)\b", code)
    assert not found, f"int8 operators use floating point ({sorted(set(found))})"
    import subprocess
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        srcs, inc = c.write_sources(Path(tmp))
        ops = next(s for s in srcs if s.name.endswith("_ops.c"))
        cmd = ["gcc", *cc.WARNING_FLAGS, "-O2", "-mgeneral-regs-only", "-c", str(ops), "-o", str(Path(tmp) / "o.o"),
               f"-I{inc}", f"-I{cc.crt_dir() / 'include'}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if "unrecognized command-line option" in proc.stderr:
            return
        assert proc.returncode == 0, f"int8 operators need FP registers:\n{proc.stderr}"


def int8_weights(rng: np.random.Generator, shape: Sequence[int]) -> np.ndarray:
    return rng.integers(-127, 128, size=tuple(shape)).astype(np.int8)


def scales(rng: np.random.Generator, n: int, lo: float = 0.002, hi: float = 0.02) -> list[float]:
    return [float(s) for s in rng.uniform(lo, hi, size=n)]


def assert_cross_compiles(c: CompiledModel, cpu: str = "cortex-m4", flags: Sequence[str] = ()) -> None:
    """The operators file builds warning-free for a Cortex-M with arm-none-eabi-gcc (the QEMU targets) at -O2
    and -O0: portable C99 where int32_t is `long` and, on the M3, float is soft-float; `flags` adds the
    CPU's own (e.g. -mfloat-abi=hard, which <arm_mve.h> needs)."""
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    import pytest

    gcc = shutil.which("arm-none-eabi-gcc")
    if gcc is None:
        pytest.skip("arm-none-eabi-gcc is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        srcs, inc = c.write_sources(Path(tmp))
        ops = next(s for s in srcs if s.name.endswith("_ops.c"))
        for opt in ("-O2", "-O0"):
            cmd = [gcc, *cc.WARNING_FLAGS, opt, f"-mcpu={cpu}", "-mthumb", *flags, "-c", str(ops), "-o",
                   str(Path(tmp) / "o.o"), f"-I{inc}", f"-I{cc.crt_dir() / 'include'}"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            assert proc.returncode == 0, f"{cpu} {opt} build of the operators failed:\n{proc.stderr[-3000:]}"
