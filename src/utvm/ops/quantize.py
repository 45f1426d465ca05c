"""quantize (float32 -> int8/uint8/int16, or integer -> integer requantization) and dequantize
(int8/uint8/int16 -> float32).

TFLite semantics (Q = the output's integer type, int8 [-128, 127] or uint8 [0, 255]):

* quantize float32 -> Q (`reference_ops::AffineQuantize`):
  y = clamp(round_half_away(x / s_out) + zp_out, Q.min, Q.max), the division in float32;
* quantize int8/uint8 -> Q (`reference_ops::Requantize`): (m, e) = QuantizeMultiplier(double(s_in) /
  double(s_out)); y = clamp(MBQM(x - zp_in, m, e) + zp_out, Q.min, Q.max). LiteRT's shortcut for equal
  scales and zero points 128 apart (y = x ^ 0x80, uint8 <-> int8) gives the same values: with equal scales
  (m, e) = (2**30, 1) and MBQM is the identity in either rounding;
* dequantize int8/uint8 -> float32 (`reference_ops::Dequantize`): y = float(double(s_in) * (x - zp_in)).

uint8 exists for the I/O of models converted with `inference_input_type/inference_output_type=tf.uint8`:
a QUANTIZE right after the input and right before the output. The output type of quantize is the declared
type of its output tensor (int8 when the graph does not declare it yet).

int16 and int32 (TFLM's quantize kernel): float32 -> int16 is AffineQuantize as above; the requantizing
pairs TFLM accepts besides int8/uint8 ones are int8 -> int16 / int32, int16 -> int8 / int16 / int32 and
int32 -> int8 / int16, all `reference_ops::Requantize` with the int32 MBQM (`x - zp_in` and the final
`+ zp_out` wrap like C's int32 arithmetic; the clamp is to the output type's range). Other pairs
(e.g. float32 -> int32, uint8 -> int16) are refused, as TFLM refuses them.

Only per-tensor quantization (activations) is supported here; per-channel constants are dequantized by
constant folding with the same formula per channel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant

OPS: tuple[str, ...] = ("quantize", "dequantize")


@dataclass(frozen=True)
class QuantizeAttrs:
    pass


@dataclass(frozen=True)
class QuantizeParams:
    """`op` "quantize" or "dequantize"; `input_dtype` -> `output_dtype`. Scales are the tensors' (per-channel
    dequantize: `scales`/`zero_points` along `axis`). Requantize (int8/uint8 -> int8/uint8) uses
    `multiplier`/`shift`."""

    op: str
    input_dtype: str
    output_dtype: str
    shape: tuple[int, ...]
    input_scale: float = 0.0
    input_zero_point: int = 0
    output_scale: float = 0.0
    output_zero_point: int = 0
    multiplier: int = 0
    shift: int = 0
    axis: int | None = None
    scales: tuple[float, ...] = ()
    zero_points: tuple[int, ...] = ()
    rounding: str = "single"


QUANTIZED = ("int8", "uint8")
_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "int32": (-(2**31), 2**31 - 1)}
#: input dtype -> the output dtypes quantize accepts for it (TFLM's quantize kernel, plus uint8 <-> int8/uint8)
_QUANTIZE_PAIRS: dict[str, tuple[str, ...]] = {
    "float32": ("int8", "uint8", "int16"),
    "int8": ("int8", "uint8", "int16", "int32"),
    "uint8": ("int8", "uint8"),
    "int16": ("int8", "int16", "int32"),
    "int32": ("int8", "int16"),
}


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    c.check_count(node, graph, 1)
    x = c.req(node, graph, 0)
    if node.op == "dequantize":
        c.check_dtype(node, graph, x, (*QUANTIZED, "int16"), "input")
        return [(tuple(x.shape), "float32")]
    c.check_dtype(node, graph, x, tuple(_QUANTIZE_PAIRS), "input")
    declared = graph.tensors.get(node.outputs[0]) if node.outputs else None
    odt = "int8"
    if declared is not None:
        allowed = _QUANTIZE_PAIRS[x.dtype]
        if declared.dtype not in allowed:
            raise c.fail(node, graph, f"output {declared.name!r} has dtype {declared.dtype}; supported: "
                                      f"{', '.join(allowed)} (for input dtype {x.dtype}, as TFLM's quantize)")
        odt = declared.dtype
    return [(tuple(x.shape), odt)]


def prepare(node: Node, graph: Graph, rounding: str = "single") -> QuantizeParams:
    ((shape, odt),) = infer(node, graph)
    rounding = _quant.kernel_rounding(rounding, node.op)
    x, y = c.req(node, graph, 0), c.out(node, graph)
    base = dict(op=node.op, input_dtype=x.dtype, output_dtype=odt, shape=shape,
                rounding=rounding)
    if node.op == "dequantize":
        q = x.quant
        if q is None:
            raise c.fail(node, graph, f"input {x.name!r} has no quantization parameters")
        c.check_scales(node, graph, x, "input")
        if len(q.scale) > 1:
            return QuantizeParams(**base, axis=q.axis, scales=tuple(q.scale),
                                  zero_points=tuple(q.zero_point) * (len(q.scale) if len(q.zero_point) == 1 else 1))
        s, zp = c.per_tensor(node, graph, x, "input")
        return QuantizeParams(**base, input_scale=s, input_zero_point=zp)
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    if x.dtype == "float32":
        return QuantizeParams(**base, output_scale=s_out, output_zero_point=zp_out)
    s_in, zp_in = c.per_tensor(node, graph, x, "input")
    m, e = _quant.quantize_multiplier(s_in / s_out, rounding)
    return QuantizeParams(**base, input_scale=s_in, input_zero_point=zp_in, output_scale=s_out,
                          output_zero_point=zp_out, multiplier=m, shift=e)


def reference(p: QuantizeParams, x: np.ndarray) -> np.ndarray:
    if p.op == "dequantize":
        xi = x.astype(np.int64)
        if p.axis is not None:
            shape = [1] * x.ndim
            shape[p.axis] = -1
            s = np.asarray(p.scales, np.float64).reshape(shape)
            z = np.asarray(p.zero_points, np.int64).reshape(shape)
            return (s * (xi - z)).astype(np.float32)
        return (np.float64(p.input_scale) * (xi - p.input_zero_point)).astype(np.float32)
    if p.input_dtype == "float32":
        q = _quant.round_half_away(x.astype(np.float32) / np.float32(p.output_scale))
        q = _quant.wrap32(np.clip(q, -(2.0 ** 31), 2.0 ** 31 - 1).astype(np.int64) + p.output_zero_point)
        return np.clip(q, *_RANGE[p.output_dtype]).astype(p.output_dtype)
    xi = _quant.wrap32(x.astype(np.int64) - p.input_zero_point)
    y = _quant.wrap32(_quant.multiply_by_quantized_multiplier(xi, p.multiplier, p.shift, p.rounding)
                      + p.output_zero_point)
    return np.clip(y, *_RANGE[p.output_dtype]).astype(p.output_dtype)
