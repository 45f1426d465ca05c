"""pad: constant padding, any rank; float32, int8, int16 and int32.

`pads` = ((before, after), ...) per axis (non-negative), `value` the padding value in the tensor's own
domain: a float for float32, the integer for int8/int16/int32 (TFLite PAD pads int8 with the output zero
point and the other types with 0, PADV2 with its constant). An optional second input holding the pads is
ignored (the attribute is authoritative). For int8, TFLite requires input and output to share scale and
zero point (checked).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c

OPS: tuple[str, ...] = ("pad",)


@dataclass(frozen=True)
class PadAttrs:
    pads: tuple[tuple[int, int], ...] = ()
    value: float = 0.0


@dataclass(frozen=True)
class PadParams:
    """`input_shape` -> `output_shape` with `pads[i] = (before, after)` cells of `value` on axis i
    (`value` is an int for int8)."""

    dtype: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]
    value: float | int


def attrs_of(node: Node) -> PadAttrs:
    pads = tuple((int(p[0]), int(p[1])) for p in node.attrs.get("pads", ()))
    return PadAttrs(pads, node.attrs.get("value", 0.0))


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    c.check_count(node, graph, (1, 2, 3))
    x = c.req(node, graph, 0)
    c.check_dtype(node, graph, x, ("float32", "int8", "int16", "int32"), "input")
    at = attrs_of(node)
    if len(at.pads) != len(x.shape):
        raise c.fail(node, graph, f"pads {list(at.pads)} need one (before, after) pair per axis of {x.name!r} "
                                  f"(rank {len(x.shape)})")
    if any(b < 0 or a < 0 for b, a in at.pads):
        raise c.fail(node, graph, f"negative pads {list(at.pads)} are not supported")
    return [(tuple(d + b + a for d, (b, a) in zip(x.shape, at.pads, strict=True)), x.dtype)]


def prepare(node: Node, graph: Graph, rounding: str = "single") -> PadParams:
    ((oshape, dtype),) = infer(node, graph)
    x, y = c.req(node, graph, 0), c.out(node, graph)
    at = attrs_of(node)
    value: float | int = float(at.value)
    if dtype != "float32":
        if float(at.value) != int(at.value):
            raise c.fail(node, graph, f"pad value {at.value} of a {dtype} tensor must be an integer")
        value = int(at.value)
        info = np.iinfo(np.dtype(dtype))
        if not info.min <= value <= info.max:
            raise c.fail(node, graph, f"pad value {value} does not fit {dtype}")
        if dtype == "int8":
            c.same_quant(node, graph, x, y)
    return PadParams(dtype, tuple(x.shape), oshape, at.pads, value)


def reference(p: PadParams, x: np.ndarray, *_unused: np.ndarray) -> np.ndarray:
    return np.pad(x, p.pads, constant_values=np.array(p.value).astype(x.dtype))
