"""Unary activations: relu, relu6, clip(min, max), logistic, tanh; float32 and int8.

Every int8 unary op is a function of one int8 value, so `prepare` computes it once for all 256 inputs and
the kernel is a table lookup: `y = table[(uint8)x]` (`table[i]` is the output for the input whose two's
complement byte is i). The table is built with these semantics (TFLite's reference kernels):

* relu / relu6 / clip (`reference_ops::ReluX`): (m, e) = QuantizeMultiplier(double(s_in) / double(s_out));
  y = clamp(MBQM(x - zp_in, m, e) + zp_out, lo, hi) with lo = max(-128, zp_out + round(min / s_out)),
  hi = min(127, zp_out + round(max / s_out)) (round half away from zero, division in float32; no upper
  bound for relu).
* logistic / tanh: LiteRT's reference kernel evaluates them through a float lookup table:
  y = clamp(round(f(s_in * (x - zp_in)) / s_out) + zp_out) with f computed in float32
  (logistic = 1 / (1 + exp(-v)); output scale 1/256, zero point -128; tanh: 1/128, 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant


@dataclass(frozen=True)
class ClipAttrs:
    min: float = float("-inf")
    max: float = float("inf")


@dataclass(frozen=True)
class ActivationParams:
    """A unary activation kernel. float32: the clamp `min`/`max` for relu/relu6/clip (unused by
    logistic/tanh). int8: `table` (256 int8 outputs indexed by the input byte); for relu/relu6/clip also
    the numbers the table was built from (`input_zero_point`, `output_zero_point`, `multiplier`, `shift`,
    `act_min`, `act_max`), for a kernel that prefers arithmetic to a lookup."""

    op: str
    dtype: str
    shape: tuple[int, ...]
    min: float
    max: float
    table: tuple[int, ...] = ()
    input_zero_point: int = 0
    output_zero_point: int = 0
    multiplier: int = 0
    shift: int = 0
    act_min: int = -128
    act_max: int = 127
    rounding: str = "single"


def bounds(node: Node) -> tuple[float, float]:
    if node.op == "relu":
        return 0.0, float("inf")
    if node.op == "relu6":
        return 0.0, 6.0
    if node.op == "clip":
        return float(node.attrs.get("min", float("-inf"))), float(node.attrs.get("max", float("inf")))
    return float("-inf"), float("inf")


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    c.check_count(node, graph, 1)
    x = c.req(node, graph, 0)
    c.check_dtype(node, graph, x, ("float32", "int8"), "input")
    lo, hi = bounds(node)
    if lo > hi:
        raise c.fail(node, graph, f"clip min {lo} is above max {hi}")
    return [(tuple(x.shape), x.dtype)]


INT8_VALUES = np.arange(-128, 128, dtype=np.int64)


def _table_of(values: np.ndarray) -> tuple[int, ...]:
    """Reorder outputs for inputs -128..127 into a table indexed by the input's byte (0..255)."""
    table = np.empty(256, dtype=np.int64)
    table[(INT8_VALUES & 0xFF)] = values
    return c.ints(table)


def _float_lut(op: str, s_in: float, zp_in: int, s_out: float, zp_out: int) -> np.ndarray:
    """LiteRT's LUTPopulate for int8: float32 dequantize, float32 transform, round, requantize, clamp."""
    deq = np.float32(s_in) * (INT8_VALUES - zp_in).astype(np.float32)
    if op == "logistic":
        e = np.exp(-deq.astype(np.float64)).astype(np.float32)
        t = np.float32(1.0) / (np.float32(1.0) + e)
    else:
        t = np.tanh(deq.astype(np.float64)).astype(np.float32)
    inv = np.float32(1.0) / np.float32(s_out)
    rescaled = _quant.round_half_away(t * inv)
    q = (rescaled + np.float32(zp_out)).astype(np.int64)
    return np.clip(q, -128, 127)


def prepare(node: Node, graph: Graph, rounding: str = "single") -> ActivationParams:
    infer(node, graph)
    rounding = _quant.kernel_rounding(rounding, node.op)
    x, y = c.req(node, graph, 0), c.out(node, graph)
    lo, hi = bounds(node)
    base = dict(op=node.op, dtype=x.dtype, shape=tuple(x.shape), min=lo, max=hi, rounding=rounding)
    if x.dtype == "float32":
        return ActivationParams(**base)
    s_in, zp_in = c.per_tensor(node, graph, x, "input")
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    if node.op in ("logistic", "tanh"):
        want = (1.0 / 256, -128) if node.op == "logistic" else (1.0 / 128, 0)
        if (s_out, zp_out) != want:
            raise c.fail(node, graph, f"int8 {node.op} output {y.name!r} must have scale {want[0]} and zero point "
                                      f"{want[1]} (got {s_out:.9g}, {zp_out})")
        return ActivationParams(**base, table=_table_of(_float_lut(node.op, s_in, zp_in, s_out, zp_out)),
                                input_zero_point=zp_in, output_zero_point=zp_out)
    m, e = _quant.quantize_multiplier(s_in / s_out, rounding)
    act_min = -128 if lo == float("-inf") else max(-128, _quant.quantize_scalar(lo, s_out, zp_out))
    act_max = 127 if hi == float("inf") else min(127, _quant.quantize_scalar(hi, s_out, zp_out))
    vals = _quant.multiply_by_quantized_multiplier(INT8_VALUES - zp_in, m, e, rounding) + zp_out
    return ActivationParams(**base, table=_table_of(np.clip(vals, act_min, act_max)), input_zero_point=zp_in,
                            output_zero_point=zp_out, multiplier=m, shift=e, act_min=act_min, act_max=act_max)


def reference(p: ActivationParams, x: np.ndarray) -> np.ndarray:
    if p.dtype == "int8":
        return np.asarray(p.table, dtype=np.int64)[x.astype(np.uint8)].astype(np.int8)
    xf = x.astype(np.float32)
    if p.op == "logistic":
        return (1.0 / (1.0 + np.exp(-xf.astype(np.float64)))).astype(np.float32)
    if p.op == "tanh":
        return np.tanh(xf)
    return np.minimum(np.maximum(xf, np.float32(p.min)), np.float32(p.max)).astype(np.float32)
