"""mean (TFLite MEAN, ONNX ReduceMean) and the mean behind global_avg_pool2d; float32, int8 and int16.

int8 and int16 semantics (TFLite `reference_ops::QuantizedMeanOrSum` as LiteRT's reference MEAN runs it): with
n = number of reduced elements and (m, e) = QuantizeMultiplier(double(s_in) / double(s_out)), the 1/n is
folded into the multiplier once:

    k  = min(floor(log2 n), 32, 31 + e)
    m' = (m << k) / n   (integer division),   e' = e - k
    y  = clamp(MultiplyByQuantizedMultiplier(sum(x) - zp_in * n, m', e') + zp_out) to the dtype's range

TFLite Micro computes MEAN the same way (int16 included; measured against its interpreter, also when input
and output share scale and zero point, for TFLM's 4D H/W case and for any number of axes). A mean over no
element (a reduced axis of extent 0) is a raw 0, as TFLM writes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant


@dataclass(frozen=True)
class MeanAttrs:
    axes: tuple[int, ...] = ()
    keepdims: bool = False


@dataclass(frozen=True)
class MeanParams:
    """A mean kernel: reduce `axes` (non-negative, sorted) of `input_shape` into `output_shape`
    (`keepdims` keeps them as 1s); `count` elements per output. int8: zero points, and the multiplier/shift
    that already include the division by `count` (see the module docstring)."""

    dtype: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    axes: tuple[int, ...]
    keepdims: bool
    count: int
    input_zero_point: int = 0
    output_zero_point: int = 0
    multiplier: int = 0
    shift: int = 0
    rounding: str = "single"


def attrs_of(node: Node) -> MeanAttrs:
    return MeanAttrs(tuple(int(a) for a in node.attrs.get("axes", ())), bool(node.attrs.get("keepdims", False)))


def _axes(node: Node, graph: Graph, rank: int, axes: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise c.fail(node, graph, f"axis {a} is out of range for rank {rank}")
        out.append(a % rank)
    return tuple(sorted(set(out)))


def _out_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    c.check_count(node, graph, (1, 2))
    x = c.req(node, graph, 0)
    c.check_dtype(node, graph, x, ("float32", "int8", "int16"), "input")
    at = attrs_of(node)
    axes = _axes(node, graph, len(x.shape), at.axes)
    return [(_out_shape(x.shape, axes, at.keepdims), x.dtype)]


def prepare_mean(node: Node, graph: Graph, axes: tuple[int, ...], keepdims: bool, rounding: str) -> MeanParams:
    rounding = _quant.kernel_rounding(rounding, node.op)
    x, y = c.req(node, graph, 0), c.out(node, graph)
    c.check_dtype(node, graph, x, ("float32", "int8", "int16"), "input")
    axes = _axes(node, graph, len(x.shape), axes)
    count = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    base = dict(dtype=x.dtype, input_shape=tuple(x.shape), output_shape=_out_shape(x.shape, axes, keepdims),
                axes=axes, keepdims=keepdims, count=count, rounding=rounding)
    if x.dtype == "float32":
        return MeanParams(**base)
    s_in, zp_in = c.per_tensor(node, graph, x, "input")
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    m, e = _quant.quantize_multiplier(s_in / s_out, rounding)
    if count > 0:
        k = min(count.bit_length() - 1, 32, 31 + e)
        m = (m << k) // count
        e -= k
    return MeanParams(**base, input_zero_point=zp_in, output_zero_point=zp_out, multiplier=int(m), shift=int(e))


def prepare(node: Node, graph: Graph, rounding: str = "single") -> MeanParams:
    infer(node, graph)
    at = attrs_of(node)
    return prepare_mean(node, graph, at.axes, at.keepdims, rounding)


def reference(p: MeanParams, x: np.ndarray, *_unused: np.ndarray) -> np.ndarray:
    if p.dtype == "float32":
        y = x.astype(np.float64).mean(axis=p.axes, keepdims=p.keepdims) if p.axes else x.astype(np.float64)
        return y.astype(np.float32).reshape(p.output_shape)
    if p.count == 0:  # TFLM returns before requantizing: raw zeros, not the output zero point
        return np.zeros(p.output_shape, dtype=p.dtype)
    s = x.astype(np.int64).sum(axis=p.axes, keepdims=p.keepdims) if p.axes else x.astype(np.int64)
    acc = s - p.input_zero_point * p.count
    y = _quant.multiply_by_quantized_multiplier(acc, p.multiplier, p.shift, p.rounding) + p.output_zero_point
    info = np.iinfo(np.dtype(p.dtype))
    return np.clip(y, info.min, info.max).astype(p.dtype).reshape(p.output_shape)
