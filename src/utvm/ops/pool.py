"""max_pool2d, avg_pool2d, global_avg_pool2d on NHWC tensors, float32, int8 and int16 (not global).

Windows: explicit padding (top, left, bottom, right), strides, dilation; with `ceil_mode` the output length
rounds up but a window starting in the trailing padding is dropped. Padded taps never win a max; an
average divides by the number of taps inside the input (TFLite; ONNX count_include_pad=0) or inside the
explicitly padded input (count_include_pad=1, padded taps count as zero).

int8 (TFLite `reference_integer_ops::MaxPool` / `AveragePool`): input and output share scale and zero point,
so the kernel works on raw values:

    max: y = clamp(max over taps of x, act)
    avg: s = sum over taps of x (raw int8); y = clamp(round_half_away(s / count), act)
         where round_half_away(s / n) = (s + n/2) / n for s > 0 and (s - n/2) / n otherwise (C division);
         with count_include_pad, padded taps add the zero point to s.

int16 (TFLite Micro's int16 MaxPool / AveragePool): the same as int8, in the int16 range.

global_avg_pool2d (x[N,H,W,C]) -> [N,1,1,C] is a mean over H and W; its int8 semantics are those of
`mean` with axes (1, 2) and keepdims (see utvm.ops.reduction).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant, reduction

OPS: tuple[str, ...] = ("max_pool2d", "avg_pool2d", "global_avg_pool2d")


@dataclass(frozen=True)
class Pool2DAttrs:
    pool: tuple[int, int] = (1, 1)
    strides: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    ceil_mode: bool = False
    count_include_pad: bool = False
    activation: str = "none"


@dataclass(frozen=True)
class Pool2DParams:
    """A pooling kernel's parameters. int8: `zero_point` (shared by input and output; only used when
    `count_include_pad`) and the clamp range `act_min`/`act_max`; float: float clamp range."""

    op: str
    dtype: str
    input_shape: tuple[int, int, int, int]
    output_shape: tuple[int, int, int, int]
    pool: tuple[int, int]
    strides: tuple[int, int]
    padding: tuple[int, int, int, int]
    dilation: tuple[int, int]
    ceil_mode: bool
    count_include_pad: bool
    activation: str
    act_min: float | int
    act_max: float | int
    zero_point: int = 0


def attrs_of(node: Node) -> Pool2DAttrs:
    a = node.attrs
    return Pool2DAttrs(tuple(a.get("pool", (1, 1))), tuple(a.get("strides", (1, 1))),
                       tuple(a.get("padding", (0, 0, 0, 0))), tuple(a.get("dilation", (1, 1))),
                       bool(a.get("ceil_mode", False)), bool(a.get("count_include_pad", False)),
                       a.get("activation", "none"))


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    c.check_count(node, graph, 1)
    x = c.req(node, graph, 0)
    c.check_dtype(node, graph, x, ("float32", "int8") if node.op == "global_avg_pool2d"
                  else ("float32", "int8", "int16"), "input")
    if len(x.shape) != 4:
        raise c.fail(node, graph, f"input {x.name!r} must be NHWC (rank 4), got shape {list(x.shape)}")
    n, h, w, ch = x.shape
    if node.op == "global_avg_pool2d":
        return [((n, 1, 1, ch), x.dtype)]
    at = attrs_of(node)
    c.activation(node, graph)
    if len(at.pool) != 2 or len(at.strides) != 2 or len(at.dilation) != 2 or len(at.padding) != 4:
        raise c.fail(node, graph, "pool/strides/dilation need 2 values and padding 4")
    if min(at.pool) < 1 or min(at.strides) < 1 or min(at.dilation) < 1 or min(at.padding) < 0:
        raise c.fail(node, graph, f"bad pool {at.pool} / strides {at.strides} / dilation {at.dilation} / "
                                  f"padding {at.padding}")
    oh = c.out_size(h, at.padding[0], at.padding[2], at.pool[0], at.strides[0], at.dilation[0], at.ceil_mode)
    ow = c.out_size(w, at.padding[1], at.padding[3], at.pool[1], at.strides[1], at.dilation[1], at.ceil_mode)
    if oh < 1 or ow < 1:
        raise c.fail(node, graph, f"pool window {at.pool} does not fit input {h}x{w} with padding {at.padding}")
    return [((n, oh, ow, ch), x.dtype)]


def prepare(node: Node, graph: Graph, rounding: str = "single") -> Pool2DParams | reduction.MeanParams:
    ((oshape, dtype),) = infer(node, graph)
    x, y = c.req(node, graph, 0), c.out(node, graph)
    _quant.check_rounding(rounding)
    if node.op == "global_avg_pool2d":
        return reduction.prepare_mean(node, graph, (1, 2), True, rounding)
    at = attrs_of(node)
    act = c.activation(node, graph)
    zp = 0
    if dtype in ("int8", "int16"):
        _, zp = c.same_quant(node, graph, x, y)
    lo, hi = c.act_range(node, graph, y)
    return Pool2DParams(node.op, dtype, tuple(x.shape), oshape, tuple(at.pool), tuple(at.strides),
                        tuple(at.padding), tuple(at.dilation), at.ceil_mode, at.count_include_pad, act, lo, hi, zp)


def reference(p: Pool2DParams, x: np.ndarray) -> np.ndarray:
    if not isinstance(p, Pool2DParams):  # global_avg_pool2d: a mean over H and W (utvm.ops.reduction)
        return reduction.reference(p, x)
    n, oh, ow, ch = p.output_shape
    h, w = p.input_shape[1], p.input_shape[2]
    xf = x.astype(np.float64)
    inside = c.valid_mask(h, w, p.pool, p.strides, p.dilation, p.padding, (oh, ow))  # [OH,OW,KH,KW]
    mask = inside[None, :, :, None]  # broadcast over N and C
    if p.op == "max_pool2d":
        win = c.windows(xf, p.pool, p.strides, p.dilation, p.padding, (oh, ow), -np.inf)
        y = win.max(axis=(4, 5))
        if p.dtype == "float32":
            return c.clamp_float(y.astype(np.float32), float(p.act_min), float(p.act_max))
        return np.clip(y, p.act_min, p.act_max).astype(p.dtype)
    win = c.windows(xf, p.pool, p.strides, p.dilation, p.padding, (oh, ow), 0.0)
    total = np.where(mask, win, 0.0).sum(axis=(4, 5))
    if p.count_include_pad:
        counted = c.valid_mask(h, w, p.pool, p.strides, p.dilation, p.padding, (oh, ow), include_pad=True)
    else:
        counted = inside
    count = counted.sum(axis=(2, 3)).astype(np.float64)[None, :, :, None]  # [1,OH,OW,1]
    if p.dtype == "float32":
        y = total / count
        return c.clamp_float(y.astype(np.float32), float(p.act_min), float(p.act_max))
    padded_taps = (count - inside.sum(axis=(2, 3))[None, :, :, None]).astype(np.int64)
    s = np.rint(total).astype(np.int64) + padded_taps * p.zero_point
    cnt = np.maximum(count.astype(np.int64), 1)  # a window with no tap inside: TFLite leaves it, we give 0
    y = np.where(s > 0, (s + cnt // 2) // cnt, -((-(s - cnt // 2)) // cnt))
    return np.clip(y, p.act_min, p.act_max).astype(p.dtype)
