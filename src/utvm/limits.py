"""The size limits of a model, in one place, and the checks that enforce them.

Two kinds of limit, for two different machines:

Target limits (fixed): what the generated C can address. Generated operators index tensors with
`int32_t` loop indices and `int32_t` byte offsets, and the targets are 32-bit Cortex-M whose `size_t` is
32 bits, so every tensor must have

* at most `MAX_TENSOR_ELEMENTS` = 2**31 - 1 elements, and every dimension at most that too (a tensor
  with a zero dimension has no elements, but its other extents still become loop bounds);
* at most `MAX_TENSOR_BYTES` = 2**31 - 1 bytes;
* a rank of at most `MAX_TENSOR_RANK` = 32 (numpy's own limit; real models stay below 8).

Host limit (configurable): the host allocates tensors too, for the reference interpreter, random inputs
and constants. No one tensor and not all of a model's tensors together may need more than the host
memory budget: `DEFAULT_HOST_MEMORY_BUDGET` = 1 GiB, overridden by the environment variable
`UTVM_HOST_MEMORY_BUDGET` (a byte count, e.g. `UTVM_HOST_MEMORY_BUDGET=4294967296`; read at every check,
so setting it in a running process takes effect).

The importers (`utvm.frontend.tflite`, `utvm.frontend.onnx`) check every tensor of a model (graph inputs,
outputs, intermediates and constants, with the shapes shape inference gives them) *before* allocating
anything of that size, `utvm.ir.Graph.from_json` (the IR inside an MLF archive) checks before decoding
constants, and the compiler's `validate` pass checks again for graphs built in Python. A
violation is reported in one line naming the tensor, its dtype and shape, its element or byte count and
the limit it exceeds: `UnsupportedModelError` from the importers, `CompileError` from the compiler,
`ModelFormatError` for a shape that is not a shape at all (a negative or non-integer dimension).

    from utvm import limits
    limits.check_tensor("x", (8, 1 << 30), "int8", what="graph input")   # raises UnsupportedModelError
    tally = limits.Tally()
    for ...: tally.add(name, shape, dtype)                               # per tensor and the running total
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from utvm.errors import ModelFormatError, UnsupportedModelError, UtvmError

MAX_TENSOR_ELEMENTS = 2**31 - 1
MAX_TENSOR_BYTES = 2**31 - 1
MAX_TENSOR_RANK = 32

HOST_MEMORY_BUDGET_ENV = "UTVM_HOST_MEMORY_BUDGET"
DEFAULT_HOST_MEMORY_BUDGET = 1 << 30

# bytes per element of the IR dtypes and of the other element types a model file may declare
_ITEMSIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2, "int32": 4,
    "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8, "complex64": 8, "complex128": 16,
}
_SHAPE_SHOWN = 8  # dims printed in a message; a longer shape is elided


def host_memory_budget() -> int:
    """The host memory budget in bytes: $UTVM_HOST_MEMORY_BUDGET, else DEFAULT_HOST_MEMORY_BUDGET."""
    raw = os.environ.get(HOST_MEMORY_BUDGET_ENV, "").strip()
    if not raw:
        return DEFAULT_HOST_MEMORY_BUDGET
    try:
        value = int(raw.replace("_", ""), 0)
    except ValueError:
        value = -1
    if value <= 0:
        raise UtvmError(f"{HOST_MEMORY_BUDGET_ENV}={raw!r} is not a positive number of bytes "
                        f"(default {DEFAULT_HOST_MEMORY_BUDGET})")
    return value


def itemsize(dtype: str) -> int:
    """Bytes per element of `dtype` (an IR dtype or another numpy type name); 1 when unknown."""
    return _ITEMSIZE.get(str(dtype), 1)


def format_shape(shape: Sequence[Any]) -> str:
    dims = list(shape)
    if len(dims) <= _SHAPE_SHOWN:
        return f"[{', '.join(str(d) for d in dims)}]"
    return f"[{', '.join(str(d) for d in dims[:_SHAPE_SHOWN])}, ... ({len(dims)} dims)]"


def _label(name: str, dtype: str, shape: Sequence[Any], what: str) -> str:
    where = f"{what}: " if what else ""
    return f"{where}tensor {name!r} {dtype}{format_shape(shape)}"


def _shape_problem(shape: Sequence[Any]) -> tuple[str, bool] | None:
    """Why `shape` is not acceptable, and whether that is a malformed shape (vs. one over a limit)."""
    if len(shape) > MAX_TENSOR_RANK:
        return f"has rank {len(shape)}, over the limit of {MAX_TENSOR_RANK} (MAX_TENSOR_RANK)", False
    for axis, d in enumerate(shape):
        if isinstance(d, bool) or not isinstance(d, int):
            try:
                ok = int(d) == d
            except (TypeError, ValueError, OverflowError):
                ok = False
            if not ok:
                return f"has a non-integer dimension {d!r} (axis {axis})", True
        d = int(d)
        if d < 0:
            return f"has a negative dimension {d} (axis {axis})", True
        if d > MAX_TENSOR_ELEMENTS:
            return (f"has dimension {d} (axis {axis}), over the limit of {MAX_TENSOR_ELEMENTS} "
                    "(MAX_TENSOR_ELEMENTS: generated C loops use int32_t indices)"), False
    return None


def tensor_size(shape: Sequence[Any], dtype: str) -> tuple[int, int]:
    """(elements, bytes) of a tensor, exactly (Python integers: no overflow, whatever the dims)."""
    n = 1
    for d in shape:
        n *= int(d)
    return n, n * itemsize(dtype)


def violation(name: str, shape: Sequence[Any], dtype: str, what: str = "",
              budget: int | None = None) -> tuple[str, bool] | None:
    """The one-line reason tensor `name` breaks a limit, and whether its shape is malformed; else None."""
    label = _label(name, dtype, shape, what)
    problem = _shape_problem(shape)
    if problem is not None:
        return f"{label} {problem[0]}", problem[1]
    n, nbytes = tensor_size(shape, dtype)
    if n > MAX_TENSOR_ELEMENTS:
        return (f"{label} has {n} elements, over the limit of {MAX_TENSOR_ELEMENTS} (MAX_TENSOR_ELEMENTS: "
                "generated C indexes tensors with int32_t)"), False
    if nbytes > MAX_TENSOR_BYTES:
        return (f"{label} is {nbytes} bytes ({n} elements of {itemsize(dtype)} bytes), over the limit of "
                f"{MAX_TENSOR_BYTES} bytes (MAX_TENSOR_BYTES: byte offsets and size_t are 32-bit on the "
                "target)"), False
    budget = host_memory_budget() if budget is None else budget
    if nbytes > budget:
        return (f"{label} is {nbytes} bytes, over the host memory budget of {budget} bytes (set "
                f"{HOST_MEMORY_BUDGET_ENV} to raise it)"), False
    return None


def check_tensor(name: str, shape: Sequence[Any], dtype: str, *, what: str = "",
                 error: type[UtvmError] = UnsupportedModelError, malformed: type[UtvmError] = ModelFormatError,
                 budget: int | None = None) -> int:
    """Raise `error` (`malformed` for a negative/non-integer dim) unless the tensor is within every limit.

    Returns its size in bytes. `what` says where it comes from ("graph input", "node 3 (ADD)", ...).
    """
    bad = violation(name, shape, dtype, what, budget)
    if bad is not None:
        raise (malformed if bad[1] else error)(bad[0])
    return tensor_size(shape, dtype)[1]


class Tally:
    """The tensors of one model, checked one by one and as a running total against the budgets.

    `add` checks the tensor itself (check_tensor) and then that the model's tensors so far need at most the
    host memory budget; call it before allocating the tensor.
    """

    def __init__(self, *, error: type[UtvmError] = UnsupportedModelError,
                 malformed: type[UtvmError] = ModelFormatError, budget: int | None = None,
                 model: str = "the model") -> None:
        self.error = error
        self.malformed = malformed
        self.budget = host_memory_budget() if budget is None else budget
        self.model = model
        self.total = 0  # bytes
        self.count = 0

    def add(self, name: str, shape: Sequence[Any], dtype: str, what: str = "") -> int:
        nbytes = check_tensor(name, shape, dtype, what=what, error=self.error, malformed=self.malformed,
                              budget=self.budget)
        self.total += nbytes
        self.count += 1
        if self.total > self.budget:
            raise self.error(f"{_label(name, dtype, shape, what)}: the {self.count} tensors of {self.model} so "
                             f"far need {self.total} bytes, over the host memory budget of {self.budget} bytes "
                             f"(set {HOST_MEMORY_BUDGET_ENV} to raise it)")
        return nbytes



def check_graph(graph: Any, *, error: type[UtvmError] = UnsupportedModelError,
                malformed: type[UtvmError] | None = None, budget: int | None = None) -> int:
    """Check every tensor of a `utvm.ir.Graph` and their total; returns the total bytes.

    Errors name the tensor and what it is: a graph input or output, a constant, or the output of (or an
    input to) node i (op 'name').
    """
    kinds: dict[str, str] = {}
    for i, node in enumerate(graph.nodes):
        for k, name in enumerate(node.outputs):
            kinds.setdefault(name, f"{node.label(i)} output {k}")
    readers: dict[str, str] = {}
    for i, node in enumerate(graph.nodes):
        for k, name in enumerate(node.inputs):
            if name:
                readers.setdefault(name, f"{node.label(i)} input {k}")
    for name in graph.inputs:
        kinds.setdefault(name, f"graph input ({readers[name]})" if name in readers else "graph input")
    for name, where in readers.items():
        kinds.setdefault(name, where)
    for name in graph.outputs:
        kinds.setdefault(name, "graph output")
    tally = Tally(error=error, malformed=malformed or error, budget=budget, model=f"graph {graph.name!r}")
    for name, t in graph.tensors.items():
        what = kinds.get(name, "unused tensor")
        if t.data is not None:
            what = f"constant ({what})" if what != "unused tensor" else "constant"
        tally.add(name, t.shape, t.dtype, what)
    return tally.total
