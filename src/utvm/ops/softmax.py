"""softmax over one axis; float32 and int8.

int8 follows TFLite's `reference_ops::Softmax` fixed-point path (gemmlowp), which LiteRT's reference
kernel runs for int8 input and output (output scale 1/256, zero point -128):

    prepare: (m, e) = QuantizeMultiplierGreaterThanOne(min(beta * s_in * 2**26, M))   (input in Q5.26)
             M = 2**30 - 1 with single rounding, 2**31 - 1 with double
             diff_min = -floor(31 * 2**26 / 2**e)        (CalculateInputRadius(5, e))
    per row: d = x - max(row)
             for d >= diff_min: v = exp_on_negative_values(MBQM(d, m, e) as Q5.26) (Q0.31)
             sum = sum of v rescaled to Q12.19 (RoundingDivideByPOT by 12)
             (r, k) = GetReciprocal(sum, 12)            (1 / sum, with k bits above one)
             y = clamp(RoundingDivideByPOT(SRDHM(r, v), k + 23) - 128, -128, 127); y = -128 if d < diff_min
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant

SCALED_DIFF_INTEGER_BITS = 5
ACCUMULATION_INTEGER_BITS = 12


@dataclass(frozen=True)
class SoftmaxAttrs:
    axis: int = -1
    beta: float = 1.0


@dataclass(frozen=True)
class SoftmaxParams:
    """A softmax kernel over `axis` (non-negative) of `shape`. int8: `input_multiplier` and
    `input_left_shift` (rescale of the input difference into Q5.26), `diff_min` (differences below it give
    -128), output zero point -128 and scale 1/256 (checked). float32: `beta`."""

    dtype: str
    shape: tuple[int, ...]
    axis: int
    beta: float
    input_multiplier: int = 0
    input_left_shift: int = 0
    diff_min: int = 0
    rounding: str = "single"


def attrs_of(node: Node) -> SoftmaxAttrs:
    return SoftmaxAttrs(int(node.attrs.get("axis", -1)), float(node.attrs.get("beta", 1.0)))


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    c.check_count(node, graph, 1)
    x = c.req(node, graph, 0)
    c.check_dtype(node, graph, x, ("float32", "int8"), "input")
    at = attrs_of(node)
    if not -len(x.shape) <= at.axis < len(x.shape):
        raise c.fail(node, graph, f"axis {at.axis} is out of range for input shape {list(x.shape)}")
    return [(tuple(x.shape), x.dtype)]


def prepare(node: Node, graph: Graph, rounding: str = "single") -> SoftmaxParams:
    infer(node, graph)
    rounding = _quant.kernel_rounding(rounding, node.op)
    x, y = c.req(node, graph, 0), c.out(node, graph)
    at = attrs_of(node)
    axis = at.axis % len(x.shape)
    base = dict(dtype=x.dtype, shape=tuple(x.shape), axis=axis, beta=at.beta,
                rounding=rounding)
    if x.dtype == "float32":
        return SoftmaxParams(**base)
    s_in, _ = c.per_tensor(node, graph, x, "input")
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    if (s_out, zp_out) != (1.0 / 256, -128):
        raise c.fail(node, graph, f"int8 softmax output {y.name!r} must have scale 1/256 and zero point -128 "
                                  f"(got {s_out:.9g}, {zp_out})")
    max_real = float((1 << 30) - 1) if rounding == "single" else float((1 << 31) - 1)
    real = min(at.beta * s_in * float(1 << (31 - SCALED_DIFF_INTEGER_BITS)), max_real)
    if not real > 1.0:
        raise c.fail(node, graph, f"int8 softmax needs beta * input scale > 2**-26 (beta {at.beta}, scale {s_in:.9g})")
    m, e = _quant.quantize_multiplier_greater_than_one(real, rounding)
    diff_min = -_quant.calculate_input_radius(SCALED_DIFF_INTEGER_BITS, e)
    return SoftmaxParams(**base, input_multiplier=m, input_left_shift=e, diff_min=diff_min)


def reference(p: SoftmaxParams, x: np.ndarray) -> np.ndarray:
    if p.dtype == "float32":
        xf = x.astype(np.float64)
        z = (xf - xf.max(axis=p.axis, keepdims=True)) * p.beta
        ez = np.exp(z)
        return (ez / ez.sum(axis=p.axis, keepdims=True)).astype(np.float32)
    xi = np.moveaxis(x.astype(np.int64), p.axis, -1)
    diff = xi - xi.max(axis=-1, keepdims=True)
    live = diff >= p.diff_min
    rescaled = _quant.multiply_by_quantized_multiplier(diff, p.input_multiplier, p.input_left_shift, p.rounding)
    exp = _quant.exp_on_negative_values(np.where(live, rescaled, 0), SCALED_DIFF_INTEGER_BITS)
    acc = _quant.rounding_divide_by_pot(exp, ACCUMULATION_INTEGER_BITS)
    total = _quant.wrap32(np.where(live, acc, 0).sum(axis=-1, keepdims=True))
    recip, bits_over_unit = _quant.get_reciprocal(total, ACCUMULATION_INTEGER_BITS)
    prod = _quant.saturating_rounding_doubling_high_mul(recip, exp)
    unsat = _quant.rounding_divide_by_pot(prod, bits_over_unit + 31 - 8)
    y = np.clip(unsat - 128, -128, 127)
    y = np.where(live, y, -128)
    return np.moveaxis(y, -1, p.axis).astype(np.int8)
