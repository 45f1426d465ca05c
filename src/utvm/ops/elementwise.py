"""add, sub, mul with numpy broadcasting and a fused activation; float32 and int8.

int8 add / sub (TFLite `reference_integer_ops::AddElementwise`, `reference_ops::SubElementwise`), with
left_shift = 20, twice_max = 2 * max(s_a, s_b) and each multiplier from QuantizeMultiplier (all <= 1):

    a' = MBQM((a - zp_a) << 20, m_a, e_a)          m_a, e_a = QM(s_a / twice_max)
    b' = MBQM((b - zp_b) << 20, m_b, e_b)          m_b, e_b = QM(s_b / twice_max)
    y  = clamp(MBQM(a' +/- b', m_o, e_o) + zp_o, act)   m_o, e_o = QM(twice_max / (2**20 * s_out))

int8 mul (TFLite `reference_integer_ops::MulElementwise`):

    y  = clamp(MBQM((a - zp_a) * (b - zp_b), m, e) + zp_o, act)     m, e = QM(s_a * s_b / s_out)

(MBQM = MultiplyByQuantizedMultiplier in the compile's rounding mode, QM = QuantizeMultiplier.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant

LEFT_SHIFT = 20


@dataclass(frozen=True)
class ElementwiseAttrs:
    activation: str = "none"


@dataclass(frozen=True)
class ElementwiseParams:
    """A binary elementwise kernel. `a_shape`/`b_shape` broadcast (numpy rules) to `output_shape`.

    int8 add/sub: `a_zero_point`, `b_zero_point`, `output_zero_point`, `left_shift` (20), `a_multiplier`/
    `a_shift`, `b_multiplier`/`b_shift` (input rescales, shift <= 0) and `output_multiplier`/`output_shift`;
    int8 mul: zero points and `output_multiplier`/`output_shift`. `act_min`/`act_max`: clamp range.
    """

    op: str
    dtype: str
    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    activation: str
    act_min: float | int
    act_max: float | int
    a_zero_point: int = 0
    b_zero_point: int = 0
    output_zero_point: int = 0
    left_shift: int = 0
    a_multiplier: int = 0
    a_shift: int = 0
    b_multiplier: int = 0
    b_shift: int = 0
    output_multiplier: int = 0
    output_shift: int = 0
    rounding: str = "single"


def attrs_of(node: Node) -> ElementwiseAttrs:
    return ElementwiseAttrs(node.attrs.get("activation", "none"))


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    c.check_count(node, graph, 2)
    a, b = c.req(node, graph, 0), c.req(node, graph, 1)
    c.activation(node, graph)
    c.check_dtype(node, graph, a, ("float32", "int8"), "input")
    if a.dtype != b.dtype:
        raise c.fail(node, graph, f"inputs {a.name!r} ({a.dtype}) and {b.name!r} ({b.dtype}) differ in dtype")
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise c.fail(node, graph, f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    return [(tuple(int(d) for d in shape), a.dtype)]


def prepare(node: Node, graph: Graph, rounding: str = "single") -> ElementwiseParams:
    ((oshape, dtype),) = infer(node, graph)
    rounding = _quant.kernel_rounding(rounding, node.op)
    a, b, y = c.req(node, graph, 0), c.req(node, graph, 1), c.out(node, graph)
    act = c.activation(node, graph)
    lo, hi = c.act_range(node, graph, y)
    base = dict(op=node.op, dtype=dtype, a_shape=tuple(a.shape), b_shape=tuple(b.shape), output_shape=oshape,
                activation=act, act_min=lo, act_max=hi, rounding=rounding)
    if dtype == "float32":
        return ElementwiseParams(**base)
    s_a, zp_a = c.per_tensor(node, graph, a, "input a")
    s_b, zp_b = c.per_tensor(node, graph, b, "input b")
    s_o, zp_o = c.per_tensor(node, graph, y, "output")
    zps = dict(a_zero_point=zp_a, b_zero_point=zp_b, output_zero_point=zp_o)
    if node.op == "mul":
        m, e = _quant.quantize_multiplier(s_a * s_b / s_o, rounding)
        return ElementwiseParams(**base, **zps, output_multiplier=m, output_shift=e)
    twice_max = 2.0 * max(s_a, s_b)
    ma, ea = _quant.quantize_multiplier(s_a / twice_max, rounding)
    mb, eb = _quant.quantize_multiplier(s_b / twice_max, rounding)
    mo, eo = _quant.quantize_multiplier(twice_max / ((1 << LEFT_SHIFT) * s_o), rounding)
    if max(ea, eb, eo) > 0:
        raise c.fail(node, graph, f"input/output scales {s_a:.9g}, {s_b:.9g} -> {s_o:.9g} need a multiplier above one")
    return ElementwiseParams(**base, **zps, left_shift=LEFT_SHIFT, a_multiplier=ma, a_shift=ea, b_multiplier=mb,
                             b_shift=eb, output_multiplier=mo, output_shift=eo)


def reference(p: ElementwiseParams, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if p.dtype == "float32":
        af, bf = a.astype(np.float32), b.astype(np.float32)
        y = af + bf if p.op == "add" else af - bf if p.op == "sub" else af * bf
        return c.clamp_float(np.broadcast_to(y, p.output_shape), float(p.act_min), float(p.act_max))
    ai = a.astype(np.int64) - p.a_zero_point
    bi = b.astype(np.int64) - p.b_zero_point
    mbqm = _quant.multiply_by_quantized_multiplier
    if p.op == "mul":
        raw = ai * bi
    else:
        sa = mbqm(ai << p.left_shift, p.a_multiplier, p.a_shift, p.rounding)
        sb = mbqm(bi << p.left_shift, p.b_multiplier, p.b_shift, p.rounding)
        raw = sa + sb if p.op == "add" else sa - sb
    y = mbqm(raw, p.output_multiplier, p.output_shift, p.rounding) + p.output_zero_point
    return np.broadcast_to(np.clip(y, p.act_min, p.act_max), p.output_shape).astype(np.int8)
