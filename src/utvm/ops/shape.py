"""Data movement: reshape, transpose, concat; any dtype.

reshape is a pure alias of the data (row-major order is unchanged; an optional second input holding the
shape is ignored, the `shape` attribute is authoritative and fully static). transpose permutes axes
(`perm`, numpy semantics). concat joins along `axis`. For int8/uint8, transpose and concat move raw bytes, so
TFLite requires every input to share the output's scale and zero point (checked in prepare).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c

OPS: tuple[str, ...] = ("reshape", "transpose", "concat")


@dataclass(frozen=True)
class ReshapeAttrs:
    shape: tuple[int, ...] = ()


@dataclass(frozen=True)
class TransposeAttrs:
    perm: tuple[int, ...] = ()


@dataclass(frozen=True)
class ConcatAttrs:
    axis: int = 0


@dataclass(frozen=True)
class ShapeParams:
    """reshape: `input_shapes[0]` -> `output_shape` (a byte copy, or nothing when aliased).
    transpose: `perm` (output axis i is input axis perm[i]). concat: `axis` (non-negative) and the
    `input_shapes` in order; output = inputs laid side by side along `axis`."""

    op: str
    dtype: str
    input_shapes: tuple[tuple[int, ...], ...]
    output_shape: tuple[int, ...]
    perm: tuple[int, ...] = ()
    axis: int = 0


def attrs_of(node: Node) -> ReshapeAttrs | TransposeAttrs | ConcatAttrs:
    if node.op == "reshape":
        return ReshapeAttrs(tuple(int(d) for d in node.attrs.get("shape", ())))
    if node.op == "transpose":
        return TransposeAttrs(tuple(int(d) for d in node.attrs.get("perm", ())))
    return ConcatAttrs(int(node.attrs.get("axis", 0)))


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    if node.op == "reshape":
        c.check_count(node, graph, (1, 2))
        x = c.req(node, graph, 0)
        shape = attrs_of(node).shape  # type: ignore[union-attr]
        if any(d < 0 for d in shape):
            raise c.fail(node, graph, f"reshape target {list(shape)} must be static (no -1 after import)")
        if int(np.prod(shape, dtype=np.int64)) != x.size:
            raise c.fail(node, graph, f"cannot reshape {x.name!r} of shape {list(x.shape)} ({x.size} elements) "
                                      f"to {list(shape)}")
        return [(tuple(shape), x.dtype)]
    if node.op == "transpose":
        c.check_count(node, graph, (1, 2))
        x = c.req(node, graph, 0)
        perm = attrs_of(node).perm  # type: ignore[union-attr]
        if sorted(perm) != list(range(len(x.shape))):
            raise c.fail(node, graph, f"perm {list(perm)} is not a permutation of the {len(x.shape)} axes of "
                                      f"{x.name!r}")
        return [(tuple(x.shape[p] for p in perm), x.dtype)]
    if len(node.inputs) < 1:
        raise c.fail(node, graph, "concat needs at least one input")
    c.check_count(node, graph, len(node.inputs))
    xs = [c.req(node, graph, i) for i in range(len(node.inputs))]
    rank = len(xs[0].shape)
    ax = attrs_of(node).axis  # type: ignore[union-attr]
    if not -rank <= ax < rank:
        raise c.fail(node, graph, f"axis {ax} is out of range for rank {rank}")
    ax %= rank
    for t in xs[1:]:
        if t.dtype != xs[0].dtype:
            raise c.fail(node, graph, f"input {t.name!r} is {t.dtype}, input {xs[0].name!r} is {xs[0].dtype}")
        if len(t.shape) != rank or any(a != b for i, (a, b) in enumerate(zip(t.shape, xs[0].shape, strict=True))
                                       if i != ax):
            raise c.fail(node, graph, f"input {t.name!r} shape {list(t.shape)} does not match "
                                      f"{list(xs[0].shape)} outside axis {ax}")
    shape = list(xs[0].shape)
    shape[ax] = sum(t.shape[ax] for t in xs)
    return [(tuple(shape), xs[0].dtype)]


def prepare(node: Node, graph: Graph, rounding: str = "single") -> ShapeParams:
    ((oshape, dtype),) = infer(node, graph)
    y = c.out(node, graph)
    if node.op == "reshape":
        x = c.req(node, graph, 0)
        return ShapeParams("reshape", dtype, (tuple(x.shape),), oshape)
    if node.op == "transpose":
        x = c.req(node, graph, 0)
        if dtype in ("int8", "uint8"):  # quantized: a copy is exact only with equal quantization
            c.same_quant(node, graph, x, y)
        return ShapeParams("transpose", dtype, (tuple(x.shape),), oshape, perm=attrs_of(node).perm)  # type: ignore[union-attr]
    xs = [c.req(node, graph, i) for i in range(len(node.inputs))]
    if dtype in ("int8", "uint8"):  # quantized: a copy is exact only with equal quantization
        for t in xs:
            c.same_quant(node, graph, t, y)
    axis = attrs_of(node).axis % len(oshape)  # type: ignore[union-attr]
    return ShapeParams("concat", dtype, tuple(tuple(t.shape) for t in xs), oshape, axis=axis)


def reference(p: ShapeParams, *arrays: np.ndarray) -> np.ndarray:
    if p.op == "reshape":
        return arrays[0].reshape(p.output_shape)
    if p.op == "transpose":
        return np.ascontiguousarray(np.transpose(arrays[0], p.perm))
    return np.concatenate(arrays, axis=p.axis)
