"""Helpers shared by the op modules: node-named errors, input lookup, quantization parameters, requantize."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from utvm.errors import GraphError
from utvm.ir.graph import Graph, Node, Tensor
from utvm.ops import _quant

OutType = tuple[tuple[int, ...], str]  # (shape, dtype) of one output, as infer() returns it


def node_label(node: Node, graph: Graph) -> str:
    for i, n in enumerate(graph.nodes):
        if n is node:
            return node.label(i)
    return node.label()


def fail(node: Node, graph: Graph, msg: str) -> GraphError:
    """A GraphError whose message starts with the node's label (index, op and name)."""
    return GraphError(f"{node_label(node, graph)}: {msg}")


def inp(node: Node, graph: Graph, i: int, *, optional: bool = False) -> Tensor | None:
    """The i-th input tensor of `node` (None when an optional input is absent)."""
    if i >= len(node.inputs) or not node.inputs[i]:
        if optional:
            return None
        raise fail(node, graph, f"input {i} is missing")
    name = node.inputs[i]
    if name not in graph.tensors:
        raise fail(node, graph, f"input {i} names tensor {name!r}, which the graph does not have")
    return graph.tensors[name]


def req(node: Node, graph: Graph, i: int) -> Tensor:
    t = inp(node, graph, i)
    assert t is not None
    return t


def out(node: Node, graph: Graph, i: int = 0) -> Tensor:
    if i >= len(node.outputs):
        raise fail(node, graph, f"has no output {i}")
    name = node.outputs[i]
    if name not in graph.tensors:
        raise fail(node, graph, f"output {i} names tensor {name!r}, which the graph does not have")
    return graph.tensors[name]


def attr(node: Node, graph: Graph, key: str):  # noqa: ANN201 - attribute values are JSON-like
    if key not in node.attrs:
        raise fail(node, graph, f"attribute {key!r} is missing")
    return node.attrs[key]


def check_count(node: Node, graph: Graph, n_in: Sequence[int] | int, n_out: int = 1) -> None:
    allowed = (n_in,) if isinstance(n_in, int) else tuple(n_in)
    if len(node.inputs) not in allowed:
        raise fail(node, graph, f"takes {' or '.join(map(str, allowed))} inputs, got {len(node.inputs)}")
    if len(node.outputs) != n_out:
        raise fail(node, graph, f"has {n_out} output(s), got {len(node.outputs)}")


def check_dtype(node: Node, graph: Graph, t: Tensor, allowed: Sequence[str], role: str) -> None:
    if t.dtype not in allowed:
        raise fail(node, graph, f"{role} {t.name!r} has dtype {t.dtype}; supported: {', '.join(allowed)}")


def per_tensor(node: Node, graph: Graph, t: Tensor, role: str) -> tuple[float, int]:
    """(scale, zero point) of a per-tensor quantized tensor; GraphError naming the tensor otherwise."""
    q = t.quant
    if q is None:
        raise fail(node, graph, f"{role} {t.name!r} is {t.dtype} but has no quantization parameters")
    if q.per_channel and len(q.scale) != 1:
        raise fail(node, graph, f"{role} {t.name!r} must be quantized per tensor, not per channel (axis {q.axis})")
    check_scales(node, graph, t, role)
    return float(q.scale[0]), int(q.zero_point[0])


def check_scales(node: Node, graph: Graph, t: Tensor, role: str) -> None:
    """Scales must be finite and positive, zero points inside the tensor's integer range."""
    q = t.quant
    assert q is not None
    bad = [s for s in q.scale if not (np.isfinite(s) and s > 0)]
    if bad:
        raise fail(node, graph, f"{role} {t.name!r} has invalid quantization scale {bad[0]!r} (must be finite, > 0)")
    if t.dtype in ("int8", "uint8", "int16"):
        info = np.iinfo(np.dtype(t.dtype))
        out = [z for z in q.zero_point if not info.min <= z <= info.max]
        if out:
            raise fail(node, graph, f"{role} {t.name!r} has zero point {out[0]} outside the {t.dtype} range")


def weight_multipliers(node: Node, graph: Graph, w: Tensor, axis: int, n_out: int, s_in: float, s_out: float,
                       rounding: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-output-channel (multiplier, shift) of s_in * s_w[o] / s_out for int8 weights `w`, quantized per
    tensor or per channel along `axis` with `n_out` scales (checked, with errors naming the weights)."""
    wq = w.quant
    if wq is None:
        raise fail(node, graph, f"int8 weights {w.name!r} have no quantization parameters")
    if len(wq.scale) > 1 and (wq.axis != axis or len(wq.scale) != n_out):
        raise fail(node, graph, f"weights {w.name!r}: per-channel quantization must be along axis {axis} "
                                f"with {n_out} scales (got axis {wq.axis}, {len(wq.scale)})")
    check_scales(node, graph, w, "weights")
    scales = [float(s) for s in wq.scale] if len(wq.scale) > 1 else [float(wq.scale[0])] * n_out
    return _quant.quantize_multipliers([s_in * s / s_out for s in scales], rounding)


def same_quant(node: Node, graph: Graph, a: Tensor, b: Tensor) -> tuple[float, int]:
    """TFLite's int8 (and uint8) data-movement ops (pooling, concat, pad, transpose) need identical in/out
    quantization."""
    sa = per_tensor(node, graph, a, "input")
    sb = per_tensor(node, graph, b, "output")
    if sa != sb:
        raise fail(node, graph, f"{a.dtype} input {a.name!r} (scale {sa[0]:.9g}, zero point {sa[1]}) and output "
                                f"{b.name!r} (scale {sb[0]:.9g}, zero point {sb[1]}) must share quantization")
    return sa


def activation(node: Node, graph: Graph) -> str:
    from utvm.ops import ACTIVATIONS

    act = node.attrs.get("activation", "none")
    if act not in ACTIVATIONS:
        raise fail(node, graph, f"unknown activation {act!r}; supported: {', '.join(ACTIVATIONS)}")
    if act in ("tanh", "sign_bit"):
        raise fail(node, graph, f"fused activation {act!r} is not supported (supported: none, relu, relu6, "
                                "relu_n1_to_1)")
    return act


def act_range(node: Node, graph: Graph, t_out: Tensor) -> tuple[int | float, int | float]:
    """The clamp range of the node's fused activation in the output's domain."""
    act = activation(node, graph)
    if t_out.dtype == "float32":
        return _quant.activation_range_float(act)
    scale, zp = per_tensor(node, graph, t_out, "output")
    return _quant.activation_range_quantized(act, scale, zp, t_out.dtype)


def ints(v: np.ndarray | Sequence[int]) -> tuple[int, ...]:
    return tuple(int(x) for x in np.asarray(v).ravel())


def requantize(acc: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int, rounding: str,
               output_zero_point: int, act_min: int, act_max: int, dtype: str = "int8") -> np.ndarray:
    """The int8 epilogue every accumulating kernel shares: scale the int32 accumulator, add the output zero
    point, clamp to the activation range."""
    scaled = _quant.multiply_by_quantized_multiplier(acc, multiplier, shift, rounding) + output_zero_point
    return np.clip(scaled, act_min, act_max).astype(dtype)


def finish_accumulator(p: Any, acc: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """The epilogue of conv2d/dense/matmul: add the bias to the (float64-held, exact) accumulator, then clamp
    (float32) or requantize with the per-channel multipliers (int8). `p` has dtype, act_min/act_max and, for
    int8, multiplier, shift, rounding and output_zero_point."""
    if p.dtype == "float32":
        if bias is not None:
            acc = acc + bias.astype(np.float64)
        return clamp_float(acc.astype(np.float32), float(p.act_min), float(p.act_max))
    acc = np.rint(acc).astype(np.int64)
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    return requantize(acc, np.asarray(p.multiplier, np.int64), np.asarray(p.shift, np.int64), p.rounding,
                      p.output_zero_point, int(p.act_min), int(p.act_max))


def clamp_float(y: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.minimum(np.maximum(y, np.float32(lo)), np.float32(hi)).astype(np.float32)


def out_size(size: int, pad_before: int, pad_after: int, kernel: int, stride: int, dilation: int,
             ceil_mode: bool = False) -> int:
    """Output length of a sliding window over `size` with explicit padding. With ceil_mode, a last window
    that would start in the trailing padding is dropped (ONNX/PyTorch rule)."""
    eff = (kernel - 1) * dilation + 1
    span = size + pad_before + pad_after - eff
    if span < 0:
        return 0
    if not ceil_mode:
        return span // stride + 1
    n = -(-span // stride) + 1
    if (n - 1) * stride >= size + pad_before:
        n -= 1
    return n


def windows(x: np.ndarray, kernel: tuple[int, int], strides: tuple[int, int], dilation: tuple[int, int],
            padding: tuple[int, int, int, int], out_hw: tuple[int, int], pad_value: float) -> np.ndarray:
    """Sliding windows of an NHWC array: [N, OH, OW, C, KH, KW] (a strided view of the padded input).

    The input is padded (top, left) by the explicit padding and at the bottom/right as far as the last
    window needs; padded cells hold `pad_value`.
    """
    kh, kw = kernel
    sh, sw = strides
    dh, dw = dilation
    top, left, _, _ = padding
    oh, ow = out_hw
    eff_h, eff_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    need_h = (oh - 1) * sh + eff_h
    need_w = (ow - 1) * sw + eff_w
    n, h, w, c = x.shape
    bottom = max(0, need_h - top - h)
    right = max(0, need_w - left - w)
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=pad_value)
    xp = xp[:, :need_h, :need_w, :]
    win = np.lib.stride_tricks.sliding_window_view(xp, (eff_h, eff_w), axis=(1, 2))
    return win[:, ::sh, ::sw, :, ::dh, ::dw][:, :oh, :ow]


def valid_mask(h: int, w: int, kernel: tuple[int, int], strides: tuple[int, int], dilation: tuple[int, int],
               padding: tuple[int, int, int, int], out_hw: tuple[int, int], *, include_pad: bool = False
               ) -> np.ndarray:
    """[OH, OW, KH, KW] booleans: which window taps fall inside the input (or inside the explicitly padded
    input when include_pad)."""
    top, left, bottom, right = padding
    lo_h, hi_h = (-top, h + bottom) if include_pad else (0, h)
    lo_w, hi_w = (-left, w + right) if include_pad else (0, w)
    oh, ow = out_hw
    ys = np.arange(oh)[:, None] * strides[0] - top + np.arange(kernel[0])[None, :] * dilation[0]  # [OH, KH]
    xs = np.arange(ow)[:, None] * strides[1] - left + np.arange(kernel[1])[None, :] * dilation[1]  # [OW, KW]
    my = (ys >= lo_h) & (ys < hi_h)
    mx = (xs >= lo_w) & (xs < hi_w)
    return my[:, None, :, None] & mx[None, :, None, :]
