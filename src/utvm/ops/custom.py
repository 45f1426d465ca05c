"""The user operator `custom` (utvm.custom_ops, docs/custom_ops.md): an operator utvm lacks, computed on the
device by a user C function and in the reference interpreter by a user numpy function.

  custom   (x0, x1, ...) -> (y0, y1, ...)   name=str (the operator's name: a TFLite custom_code, a builtin
           or ONNX op type)  options=str (the option bytes, hex)  outputs=[[shape, dtype], ...]

Any dtype of utvm.ir; quantization per tensor (scale, zero point) is passed on, per-channel tensors are
refused. The output shapes and dtypes are the attribute `outputs` (the frontend takes them from the
model's tensors: the user function cannot be asked). No state, and never folded: the user function may
be anything.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm import custom_ops
from utvm.errors import OracleError
from utvm.ir.graph import Graph, Node, Tensor
from utvm.ops import _common as c

OPS: tuple[str, ...] = (custom_ops.OP,)


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str
    scale: float  # 0.0: not quantized
    zero_point: int


@dataclass(frozen=True)
class CustomParams:
    name: str
    label: str  # the node's label, for messages
    options: bytes
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]


def _outputs_attr(node: Node, graph: Graph) -> list[c.OutType]:
    raw = c.attr(node, graph, "outputs")
    try:
        outs = [(tuple(int(d) for d in shape), str(dtype)) for shape, dtype in raw]
    except (TypeError, ValueError) as exc:
        raise c.fail(node, graph, f"attribute 'outputs' must be [[shape, dtype], ...], got {raw!r}") from exc
    if len(outs) != len(node.outputs):
        raise c.fail(node, graph, f"attribute 'outputs' describes {len(outs)} outputs; the node has "
                                  f"{len(node.outputs)}")
    return outs


def options_of(node: Node, graph: Graph) -> bytes:
    try:
        return bytes.fromhex(str(node.attrs.get("options", "")))
    except ValueError as exc:
        raise c.fail(node, graph, "attribute 'options' is not a hex string") from exc


def _spec(node: Node, graph: Graph, t: Tensor, role: str) -> TensorSpec:
    scale, zp = 0.0, 0
    if t.quant is not None:
        if len(t.quant.scale) != 1:
            raise c.fail(node, graph, f"{role} {t.name!r} is quantized per channel; a user operator's tensors "
                                      "are quantized per tensor or not at all")
        scale, zp = float(t.quant.scale[0]), int(t.quant.zero_point[0])
    return TensorSpec(tuple(int(d) for d in t.shape), t.dtype, scale, zp)


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    name = c.attr(node, graph, "name")
    if not isinstance(name, str) or not name:
        raise c.fail(node, graph, "attribute 'name' must be the operator's name")
    if not node.outputs:
        raise c.fail(node, graph, "has no outputs")
    for i in range(len(node.inputs)):
        c.req(node, graph, i)
    options_of(node, graph)
    return _outputs_attr(node, graph)


def prepare(node: Node, graph: Graph, rounding: str = "single") -> CustomParams:
    infer(node, graph)
    ins = tuple(_spec(node, graph, c.req(node, graph, i), f"input {i}") for i in range(len(node.inputs)))
    outs = tuple(_spec(node, graph, c.out(node, graph, i), f"output {i}") for i in range(len(node.outputs)))
    return CustomParams(str(node.attrs["name"]), c.node_label(node, graph), options_of(node, graph), ins, outs)


def reference(p: CustomParams, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
    """The user's numpy twin (custom_ops.run_python): inside the reference interpreter's error contract, every
    failure of the user's code an OracleError naming the node, the operator and the twin."""
    if len(arrays) != len(p.inputs):
        raise OracleError(f"{p.label}: user operator {p.name!r} got {len(arrays)} inputs; it has {len(p.inputs)}")
    results = custom_ops.run_python(p.name, p.label,
                                    [(a, s.scale, s.zero_point) for a, s in zip(arrays, p.inputs, strict=True)],
                                    [(s.shape, s.dtype, s.scale, s.zero_point) for s in p.outputs], p.options)
    return results[0] if len(results) == 1 else tuple(results)
