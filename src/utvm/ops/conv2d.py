"""conv2d and depthwise_conv2d (NHWC input, OHWI / 1HW(C*M) weights), float32 and int8.

int8 semantics are TFLite's reference kernels `reference_integer_ops::ConvPerChannel` and
`DepthwiseConvPerChannel`:

    acc[o]  = bias[o] + sum over the window (x - input_zero_point) * w[o]     (int32; padding taps skipped,
                                                                               i.e. x = input_zero_point)
    y       = clamp(MultiplyByQuantizedMultiplier(acc, multiplier[o], shift[o]) + output_zero_point,
                    act_min, act_max)

with `multiplier[o], shift[o] = QuantizeMultiplier(double(s_in) * double(s_w[o]) / double(s_out))` (one
entry per output channel; a per-tensor weight scale is broadcast) and the clamp range of the fused
activation in the output's quantized domain. The weight zero point must be 0 (TFLite requires symmetric
int8 weights). The accumulator cannot overflow int32 for the kernel sizes models use: each product is at
most 255 * 128 < 2**15, so up to 2**16 taps fit.

Float: the same sums in float (accumulated in float64 here), plus bias, clamped to the activation range.

int16 activations with int8 weights ("16x8", TFLM's `ConvPerChannel` / `DepthwiseConvPerChannel` for
int16): per-channel or per-tensor symmetric int8 weights, bias int64 (conv2d also int32; TFLM reads a
depthwise bias as int64 whatever its type, so an int32 one is refused), and

    acc = bias[o] + sum over the window x * w        (NO zero points: TFLM's int16 kernels ignore the input
                                                      and output zero points in the arithmetic)
    y   = clamp(MBQM(acc, multiplier[o], shift[o]), act_min, act_max)

where the accumulator is int64 with an int64 bias (or no bias) and MBQM is TFLite's int64
MultiplyByQuantizedMultiplier (`multiply_by_quantized_multiplier_int64`: the multiplier reduced to 16 bits,
one rounding), and the accumulator is int32 (wrapping) with an int32 bias and MBQM is the usual int32 one.
The clamp range still comes from the output's zero point, as TFLM computes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant

OPS: tuple[str, ...] = ("conv2d", "depthwise_conv2d")


@dataclass(frozen=True)
class Conv2DAttrs:
    strides: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)  # top, left, bottom, right
    groups: int = 1
    activation: str = "none"


@dataclass(frozen=True)
class DepthwiseConv2DAttrs:
    strides: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    depth_multiplier: int = 1
    activation: str = "none"


@dataclass(frozen=True)
class Conv2DParams:
    """Everything a conv2d / depthwise_conv2d kernel needs besides the weight and bias data.

    Shapes: input (N, H, W, C); weights (O, KH, KW, C/groups) for conv2d, (1, KH, KW, C*M) for depthwise;
    output (N, OH, OW, O). Padding is explicit (top, left, bottom, right); padded taps contribute nothing
    (int8: they are the input zero point). Output channel o of a depthwise conv reads input channel o // M.
    For conv2d with groups, output channel o reads input channels [g*C/groups, (g+1)*C/groups) where
    g = o // (O/groups).

    int8 only: `input_zero_point` (the kernel adds input_offset = -input_zero_point), `output_zero_point`,
    `multiplier`/`shift` (one per output channel, TFLite's QuantizeMultiplier; apply with
    MultiplyByQuantizedMultiplier in `rounding` mode), `act_min`/`act_max` (quantized clamp). Float:
    `act_min`/`act_max` are float clamps and the int8 fields are zero / empty.
    """

    op: str
    dtype: str
    input_shape: tuple[int, int, int, int]
    weight_shape: tuple[int, int, int, int]
    output_shape: tuple[int, int, int, int]
    strides: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int, int, int]
    groups: int
    depth_multiplier: int
    has_bias: bool
    activation: str
    act_min: float | int
    act_max: float | int
    input_zero_point: int = 0
    output_zero_point: int = 0
    multiplier: tuple[int, ...] = ()
    shift: tuple[int, ...] = ()
    rounding: str = "single"
    #: int16 only: 64 (int64 accumulator and bias, int64 MBQM) or 32 (int32 bias, int32 accumulator)
    acc_bits: int = 32

    @property
    def kernel(self) -> tuple[int, int]:
        return self.weight_shape[1], self.weight_shape[2]


def attrs_of(node: Node) -> Conv2DAttrs | DepthwiseConv2DAttrs:
    a = node.attrs
    if node.op == "depthwise_conv2d":
        return DepthwiseConv2DAttrs(tuple(a.get("strides", (1, 1))), tuple(a.get("dilation", (1, 1))),
                                    tuple(a.get("padding", (0, 0, 0, 0))), int(a.get("depth_multiplier", 1)),
                                    a.get("activation", "none"))
    return Conv2DAttrs(tuple(a.get("strides", (1, 1))), tuple(a.get("dilation", (1, 1))),
                       tuple(a.get("padding", (0, 0, 0, 0))), int(a.get("groups", 1)), a.get("activation", "none"))


def _geometry(node: Node, graph: Graph):  # noqa: ANN202
    c.check_count(node, graph, (2, 3))
    x, w = c.req(node, graph, 0), c.req(node, graph, 1)
    b = c.inp(node, graph, 2, optional=True)
    at = attrs_of(node)
    c.activation(node, graph)
    if len(x.shape) != 4:
        raise c.fail(node, graph, f"input {x.name!r} must be NHWC (rank 4), got shape {list(x.shape)}")
    if len(w.shape) != 4:
        raise c.fail(node, graph, f"weights {w.name!r} must be rank 4, got shape {list(w.shape)}")
    if len(at.strides) != 2 or len(at.dilation) != 2 or len(at.padding) != 4:
        raise c.fail(node, graph, "strides/dilation need 2 values and padding 4 (top, left, bottom, right)")
    if min(at.strides) < 1 or min(at.dilation) < 1 or min(at.padding) < 0:
        raise c.fail(node, graph, f"bad strides {at.strides} / dilation {at.dilation} / padding {at.padding}")
    n, h, wd, ch = x.shape
    if node.op == "depthwise_conv2d":
        assert isinstance(at, DepthwiseConv2DAttrs)
        m = at.depth_multiplier
        if w.shape[0] != 1 or w.shape[3] != ch * m:
            raise c.fail(node, graph, f"depthwise weights {w.name!r} shape {list(w.shape)} must be "
                                      f"[1, KH, KW, {ch}*{m}] for input channels {ch}, depth multiplier {m}")
        groups, n_out = ch, ch * m
    else:
        assert isinstance(at, Conv2DAttrs)
        groups, m = at.groups, 1
        n_out = w.shape[0]
        if groups < 1 or ch % groups or n_out % groups or w.shape[3] * groups != ch:
            raise c.fail(node, graph, f"weights {w.name!r} shape {list(w.shape)} do not fit input channels {ch} "
                                      f"with groups={groups}")
    if b is not None and tuple(b.shape) != (n_out,):
        raise c.fail(node, graph, f"bias {b.name!r} shape {list(b.shape)} must be [{n_out}]")
    kh, kw = w.shape[1], w.shape[2]
    oh = c.out_size(h, at.padding[0], at.padding[2], kh, at.strides[0], at.dilation[0])
    ow = c.out_size(wd, at.padding[1], at.padding[3], kw, at.strides[1], at.dilation[1])
    if oh < 1 or ow < 1:
        raise c.fail(node, graph, f"window {kh}x{kw} (dilation {at.dilation}) does not fit input "
                                  f"{h}x{wd} with padding {at.padding}")
    return x, w, b, at, (n, oh, ow, n_out), groups, m


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    x, w, b, _, oshape, _, _ = _geometry(node, graph)
    c.check_dtype(node, graph, x, ("float32", "int8", "int16"), "input")
    if x.dtype == "int16":
        c.check_dtype(node, graph, w, ("int8",), "weights (int16 activations take int8 weights)")
        if b is not None:
            allowed = ("int64",) if node.op == "depthwise_conv2d" else ("int64", "int32")
            c.check_dtype(node, graph, b, allowed, "bias")
        return [(oshape, "int16")]
    if x.dtype == "float32":
        if w.dtype != "float32":
            raise c.fail(node, graph, f"float32 input with {w.dtype} weights {w.name!r} (a hybrid model): "
                                      "hybrid int8-weight/float-activation layers are not supported")
        if b is not None:
            c.check_dtype(node, graph, b, ("float32",), "bias")
        return [(oshape, "float32")]
    c.check_dtype(node, graph, w, ("int8",), "weights")
    if b is not None:
        c.check_dtype(node, graph, b, ("int32",), "bias")
    return [(oshape, "int8")]


def prepare(node: Node, graph: Graph, rounding: str = "single") -> Conv2DParams:
    rounding = _quant.kernel_rounding(rounding, node.op)
    x, w, b, at, oshape, groups, m = _geometry(node, graph)
    ((_, dtype),) = infer(node, graph)
    y = c.out(node, graph)
    act = c.activation(node, graph)
    lo, hi = c.act_range(node, graph, y)
    common = dict(op=node.op, dtype=dtype, input_shape=tuple(x.shape), weight_shape=tuple(w.shape),
                  output_shape=oshape, strides=tuple(at.strides), dilation=tuple(at.dilation),
                  padding=tuple(at.padding), groups=groups if node.op == "conv2d" else x.shape[3],
                  depth_multiplier=m, has_bias=b is not None, activation=act, act_min=lo, act_max=hi,
                  rounding=rounding)
    if dtype == "float32":
        return Conv2DParams(**common)
    s_in, zp_in = c.per_tensor(node, graph, x, "input")
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    n_out = oshape[3]
    mult, shift = c.weight_multipliers(node, graph, w, 0 if node.op == "conv2d" else 3, n_out, s_in, s_out, rounding)
    if any(int(z) != 0 for z in w.quant.zero_point):
        raise c.fail(node, graph, f"int8 weights {w.name!r} must be symmetric (zero point 0), got {w.quant.zero_point}")
    if dtype == "int16":  # TFLM's int16 kernels use no zero point in the arithmetic
        return Conv2DParams(**common, multiplier=c.ints(mult), shift=c.ints(shift),
                            acc_bits=32 if b is not None and b.dtype == "int32" else 64)
    return Conv2DParams(**common, input_zero_point=zp_in, output_zero_point=zp_out,
                        multiplier=c.ints(mult), shift=c.ints(shift))


def _accumulate(p: Conv2DParams, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """sum over the window of (x - zp) * w, in float64 (exact for int8 data), shape [N, OH, OW, O]."""
    xf = x.astype(np.float64) - p.input_zero_point
    n, oh, ow, n_out = p.output_shape
    win = c.windows(xf, p.kernel, p.strides, p.dilation, p.padding, (oh, ow), 0.0)  # [N,OH,OW,C,KH,KW]
    kh, kw = p.kernel
    wf = w.astype(np.float64)
    if p.op == "depthwise_conv2d":
        m = p.depth_multiplier
        wd = wf[0].reshape(kh, kw, -1, m)  # [KH, KW, C, M]
        return np.einsum("nhwcij,ijcm->nhwcm", win, wd, optimize=True).reshape(n, oh, ow, n_out)
    g = p.groups
    cg = p.input_shape[3] // g
    og = n_out // g
    cols = win.reshape(n, oh, ow, g, cg, kh, kw).transpose(0, 1, 2, 3, 5, 6, 4)  # [..., g, KH, KW, Cg]
    cols = np.ascontiguousarray(cols).reshape(n * oh * ow, g, kh * kw * cg)
    wg = wf.reshape(g, og, kh * kw * cg)
    acc = np.einsum("pgk,gok->pgo", cols, wg, optimize=True)
    return acc.reshape(n, oh, ow, n_out)


def reference(p: Conv2DParams, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    acc = _accumulate(p, x, w)
    if p.dtype == "int16":
        return finish_int16(p, acc, bias)
    return c.finish_accumulator(p, acc, bias)


# --- int16 x int8 ("16x8") requantization ----------------------------------------------------------------------
def wrap64(v: np.ndarray) -> np.ndarray:
    """Python integers (an object array) reduced modulo 2**64 into int64 (C's wrap-around)."""
    a = np.asarray(v, dtype=object)
    return np.asarray((a + (1 << 63)) % (1 << 64) - (1 << 63), dtype=object).astype(np.int64)


def multiply_by_quantized_multiplier_int64(x: np.ndarray | int, multiplier: np.ndarray | int,
                                           shift: np.ndarray | int, rounding: str = "double") -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier(int64 x, int32 multiplier, int shift) -> int32 (as int64 array).

    "double" (TFLM, TFLite without TFLITE_SINGLE_ROUNDING): the multiplier is first reduced to 16 bits,
    r = (m + 2**15) >> 16 (0x7FFF from m >= 0x7FFF0000), then y = (x * r + 2**(14 - shift)) >> (15 - shift):
    one rounding, ties towards +infinity. "single" (TFLITE_SINGLE_ROUNDING): y = (x * m + 2**(30 - shift))
    >> (31 - shift) in int64 arithmetic (wrapping like C). The result is truncated to int32 like C's cast.
    """
    x = np.asarray(x, dtype=np.int64)
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    if rounding == "double":
        reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
        total = 15 - s
        return _quant.wrap32((x * reduced + (np.int64(1) << (total - 1))) >> total)
    if rounding == "single":
        total = 31 - s
        prod = wrap64(x.astype(object) * m.astype(object) + (np.int64(1) << (total - 1)).astype(object))
        return _quant.wrap32(prod >> total)
    raise ValueError(f"rounding must be one of {_quant.ROUNDINGS}, not {rounding!r}")


def requantize_int16(acc: np.ndarray, acc_bits: int, multiplier: np.ndarray, shift: np.ndarray, rounding: str,
                     output_zero_point: int, act_min: int, act_max: int, dtype: str = "int16") -> np.ndarray:
    """The 16x8 epilogue: an int64 accumulator with the int64 MBQM, or (acc_bits 32) the int32 accumulator
    (wrapped) with the int32 MBQM; plus the output zero point; clamped."""
    if acc_bits == 32:
        y = _quant.multiply_by_quantized_multiplier(_quant.wrap32(acc), multiplier, shift, rounding)
    else:
        y = multiply_by_quantized_multiplier_int64(acc, multiplier, shift, rounding)
    return np.clip(y + output_zero_point, act_min, act_max).astype(dtype)


def finish_int16(p: Conv2DParams, acc: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    acc = np.rint(acc).astype(np.int64)
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    return requantize_int16(acc, p.acc_bits, np.asarray(p.multiplier, np.int64), np.asarray(p.shift, np.int64),
                            p.rounding, p.output_zero_point, int(p.act_min), int(p.act_max))
