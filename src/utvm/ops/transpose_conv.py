"""transpose_conv: the transposed (fractionally strided) 2-D convolution of TFLite's TRANSPOSE_CONV.

    transpose_conv (x[N,H,W,C], w[O,KH,KW,C], [bias[O]])
                   strides=(sh,sw) padding=(top,left) output_shape=(N,OH,OW,O) activation=str

Semantics (TFLite's reference `TransposeConv`, a scatter): every input pixel (iy, ix) adds x * w[o, ky, kx, c]
to the output pixel (iy * sh - top + ky, ix * sw - left + kx) when that pixel lies inside the output
(OH, OW come from `output_shape`, the output tensor's declared shape; TFLM ignores the shape operand); then
the bias is added and the fused activation clamps. `padding` is what TFLite computes from SAME/VALID with
the OUTPUT size in the role of the input size (`ComputePaddingHeightWidth`); only (top, left) matter.

Quantized (per-tensor activations, symmetric int8 weights per tensor or per output channel, axis 0):

* int8 (bias int32): acc = bias[o] + sum (x - input_zp) * w (int32), y = clamp(MBQM(acc, m[o], s[o]) +
  output_zp) with (m, s) = QuantizeMultiplier(s_in * s_w[o] / s_out) — as conv2d.
* int16 x int8 (bias int64, int16 — TFLM widens it to int64 — or none): acc = bias[o] + sum x * w in
  int64, TFLite's int64 MultiplyByQuantizedMultiplier, NO zero points (TFLM's 16x8 kernel ignores them).
  An int32 bias is refused: TFLM reads it as int64 (out of bounds).

Float: the sums in float (float64 here), plus bias, clamped to the activation's range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant

OPS: tuple[str, ...] = ("transpose_conv",)


@dataclass(frozen=True)
class TransposeConvAttrs:
    strides: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)  # top, left
    output_shape: tuple[int, int, int, int] = (0, 0, 0, 0)
    activation: str = "none"


@dataclass(frozen=True)
class TransposeConvParams:
    """Shapes (input NHWC, weights OHWI, output NHWC), strides, (top, left) padding, the clamp range in the
    output's domain; quantized: zero points (int8: the input's is subtracted; int16 uses none), per-channel
    multipliers/shifts applied in `rounding` (int16: with the int64 MBQM, utvm.ops.conv2d)."""

    dtype: str
    input_shape: tuple[int, int, int, int]
    weight_shape: tuple[int, int, int, int]
    output_shape: tuple[int, int, int, int]
    strides: tuple[int, int]
    padding: tuple[int, int]
    has_bias: bool
    activation: str
    act_min: float | int
    act_max: float | int
    input_zero_point: int = 0
    output_zero_point: int = 0
    multiplier: tuple[int, ...] = ()
    shift: tuple[int, ...] = ()
    rounding: str = "double"


def attrs_of(node: Node) -> TransposeConvAttrs:
    a = node.attrs
    return TransposeConvAttrs(tuple(int(v) for v in a.get("strides", (1, 1))),
                              tuple(int(v) for v in a.get("padding", (0, 0))),
                              tuple(int(v) for v in a.get("output_shape", (0, 0, 0, 0))),
                              a.get("activation", "none"))


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    c.check_count(node, graph, (2, 3))
    x, w = c.req(node, graph, 0), c.req(node, graph, 1)
    b = c.inp(node, graph, 2, optional=True)
    at = attrs_of(node)
    c.activation(node, graph)
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise c.fail(node, graph, f"input {x.name!r} (shape {list(x.shape)}) and weights {w.name!r} (shape "
                                  f"{list(w.shape)}) must be rank 4 (NHWC and OHWI)")
    if len(at.strides) != 2 or min(at.strides) < 1:
        raise c.fail(node, graph, f"strides {list(at.strides)} must be two values >= 1")
    if len(at.padding) != 2 or min(at.padding) < 0:
        raise c.fail(node, graph, f"padding {list(at.padding)} must be (top, left) >= 0")
    if len(at.output_shape) != 4 or min(at.output_shape) < 1:
        raise c.fail(node, graph, f"output_shape {list(at.output_shape)} must be 4 positive sizes (NHWC)")
    n, _, _, ch = x.shape
    o = w.shape[0]
    if w.shape[3] != ch:
        raise c.fail(node, graph, f"weights {w.name!r} shape {list(w.shape)} must end in the {ch} input channels")
    if at.output_shape[0] != n or at.output_shape[3] != o:
        raise c.fail(node, graph, f"output_shape {list(at.output_shape)} must have batch {n} and {o} channels "
                                  f"(the weights' first dimension)")
    if b is not None and tuple(b.shape) != (o,):
        raise c.fail(node, graph, f"bias {b.name!r} shape {list(b.shape)} must be [{o}]")
    c.check_dtype(node, graph, x, ("float32", "int8", "int16"), "input")
    if x.dtype == "float32":
        c.check_dtype(node, graph, w, ("float32",), "weights (hybrid models are not supported)")
        if b is not None:
            c.check_dtype(node, graph, b, ("float32",), "bias")
    else:
        c.check_dtype(node, graph, w, ("int8",), "weights")
        if b is not None:
            c.check_dtype(node, graph, b, ("int32",) if x.dtype == "int8" else ("int64", "int16"), "bias")
    return [(tuple(at.output_shape), x.dtype)]


def prepare(node: Node, graph: Graph, rounding: str = "single") -> TransposeConvParams:
    ((oshape, dtype),) = infer(node, graph)
    rounding = _quant.kernel_rounding(rounding, node.op)
    x, w, y = c.req(node, graph, 0), c.req(node, graph, 1), c.out(node, graph)
    b = c.inp(node, graph, 2, optional=True)
    at = attrs_of(node)
    lo, hi = c.act_range(node, graph, y)
    base = dict(dtype=dtype, input_shape=tuple(x.shape), weight_shape=tuple(w.shape), output_shape=oshape,
                strides=at.strides, padding=at.padding, has_bias=b is not None, activation=c.activation(node, graph),
                act_min=lo, act_max=hi, rounding=rounding)
    if dtype == "float32":
        return TransposeConvParams(**base)
    s_in, zp_in = c.per_tensor(node, graph, x, "input")
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    mult, shift = c.weight_multipliers(node, graph, w, 0, oshape[3], s_in, s_out, rounding)
    assert w.quant is not None
    if any(int(z) != 0 for z in w.quant.zero_point):
        raise c.fail(node, graph, f"int8 weights {w.name!r} must be symmetric (zero point 0), got {w.quant.zero_point}")
    if dtype == "int16":
        zp_in = zp_out = 0  # TFLM's 16x8 kernel uses no zero point in its arithmetic
    return TransposeConvParams(**base, input_zero_point=zp_in, output_zero_point=zp_out, multiplier=c.ints(mult),
                               shift=c.ints(shift))


def accumulate(p: TransposeConvParams, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The scattered sums (float64, exact for the integer types), shape output_shape."""
    n, h, wd, _ = p.input_shape
    _, kh, kw, _ = p.weight_shape
    _, oh, ow, o = p.output_shape
    sh, sw = p.strides
    top, left = p.padding
    xf = x.astype(np.float64) - p.input_zero_point
    wf = w.astype(np.float64)
    # contributions [N, H, W, KH, KW, O], then scattered into a padded canvas
    contrib = np.einsum("nhwc,oijc->nhwijo", xf, wf, optimize=True)
    full_h = max((h - 1) * sh + kh, top + oh)
    full_w = max((wd - 1) * sw + kw, left + ow)
    canvas = np.zeros((n, full_h, full_w, o), dtype=np.float64)
    for ky in range(kh):
        for kx in range(kw):
            canvas[:, ky:ky + (h - 1) * sh + 1:sh, kx:kx + (wd - 1) * sw + 1:sw, :] += contrib[:, :, :, ky, kx, :]
    return canvas[:, top:top + oh, left:left + ow, :]


def reference(p: TransposeConvParams, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    acc = accumulate(p, x, w)
    if p.dtype == "float32":
        if bias is not None:
            acc = acc + bias.astype(np.float64)
        return c.clamp_float(acc.astype(np.float32), float(p.act_min), float(p.act_max))
    if p.dtype == "int16":
        from utvm.ops.conv2d import requantize_int16

        acc = np.rint(acc).astype(np.int64) + (bias.astype(np.int64) if bias is not None else 0)
        return requantize_int16(acc, 64, np.asarray(p.multiplier, np.int64), np.asarray(p.shift, np.int64),
                                p.rounding, p.output_zero_point, int(p.act_min), int(p.act_max))
    acc = np.rint(acc).astype(np.int64) + (bias.astype(np.int64) if bias is not None else 0)
    return c.requantize(_quant.wrap32(acc), np.asarray(p.multiplier, np.int64), np.asarray(p.shift, np.int64),
                        p.rounding, p.output_zero_point, int(p.act_min), int(p.act_max))
