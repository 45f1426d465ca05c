"""add, sub, mul with numpy broadcasting and a fused activation; float32, int8, int16 and int32.

int8 add / sub (TFLite `reference_integer_ops::AddElementwise`, `reference_ops::SubElementwise`), with
left_shift = 20, twice_max = 2 * max(s_a, s_b) and each multiplier from QuantizeMultiplier (all <= 1):

    a' = MBQM((a - zp_a) << 20, m_a, e_a)          m_a, e_a = QM(s_a / twice_max)
    b' = MBQM((b - zp_b) << 20, m_b, e_b)          m_b, e_b = QM(s_b / twice_max)
    y  = clamp(MBQM(a' +/- b', m_o, e_o) + zp_o, act)   m_o, e_o = QM(twice_max / (2**20 * s_out))

int8 mul (TFLite `reference_integer_ops::MulElementwise`):

    y  = clamp(MBQM((a - zp_a) * (b - zp_b), m, e) + zp_o, act)     m, e = QM(s_a * s_b / s_out)

(MBQM = MultiplyByQuantizedMultiplier in the compile's rounding mode, QM = QuantizeMultiplier.)

int16 (TFLite Micro): add / sub take the general int8 path with left_shift = 15 (TFLM never takes TFLite's
power-of-two int16 path, whatever pot_scale_int16 says); mul as int8 with all zero points 0 (checked).
The scale ratios are computed in double for SUB too: measured against the tflite-micro package (its int16
SUB matches double ratios and not float32 ones, although recent sub_common.cc sources compute in float).

int32 (unquantized; TFLM refuses quantization parameters on ADD/SUB inputs and SUB's output): two's
complement wrapping a + b, a - b, a * b, clamped to the activation's int32 range (CalculateActivationRange
<int32_t>: relu [0, INT32_MAX], relu6 [0, 6], relu_n1_to_1 [-1, 1]) for sub and mul. TFLM's int32 ADD
ignores the fused activation (it clamps to the whole int32 range), and so does utvm.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant

LEFT_SHIFT = 20
LEFT_SHIFT_INT16 = 15
INT32_RANGE = (-(1 << 31), (1 << 31) - 1)
_INT32_ACT = {"none": INT32_RANGE, "relu": (0, INT32_RANGE[1]), "relu6": (0, 6), "relu_n1_to_1": (-1, 1)}


@dataclass(frozen=True)
class ElementwiseAttrs:
    activation: str = "none"


@dataclass(frozen=True)
class ElementwiseParams:
    """A binary elementwise kernel. `a_shape`/`b_shape` broadcast (numpy rules) to `output_shape`.

    int8 / int16 add/sub: `a_zero_point`, `b_zero_point`, `output_zero_point`, `left_shift` (20; 15 for
    int16), `a_multiplier`/`a_shift`, `b_multiplier`/`b_shift` (input rescales, shift <= 0) and
    `output_multiplier`/`output_shift`;
    int8 / int16 mul: zero points and `output_multiplier`/`output_shift`. `act_min`/`act_max`: clamp range.
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
    c.check_dtype(node, graph, a, ("float32", "int8", "int16", "int32"), "input")
    if a.dtype != b.dtype:
        raise c.fail(node, graph, f"inputs {a.name!r} ({a.dtype}) and {b.name!r} ({b.dtype}) differ in dtype")
    if a.dtype == "int32":
        y = c.out(node, graph)
        quantized = [t for t in ((a, b) if node.op != "sub" else (a, b, y)) if t.quant is not None]
        if node.op != "mul" and quantized:
            raise c.fail(node, graph, f"int32 {node.op} must be unquantized (TFLite Micro), but {quantized[0].name!r} "
                                      "has quantization parameters")
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
    if dtype == "int32":
        lo, hi = INT32_RANGE if node.op == "add" else _INT32_ACT[act]
    else:
        lo, hi = c.act_range(node, graph, y)
    base = dict(op=node.op, dtype=dtype, a_shape=tuple(a.shape), b_shape=tuple(b.shape), output_shape=oshape,
                activation=act, act_min=lo, act_max=hi, rounding=rounding)
    if dtype in ("float32", "int32"):
        return ElementwiseParams(**base)
    s_a, zp_a = c.per_tensor(node, graph, a, "input a")
    s_b, zp_b = c.per_tensor(node, graph, b, "input b")
    s_o, zp_o = c.per_tensor(node, graph, y, "output")
    zps = dict(a_zero_point=zp_a, b_zero_point=zp_b, output_zero_point=zp_o)
    if node.op == "mul":
        if dtype == "int16" and (zp_a, zp_b, zp_o) != (0, 0, 0):
            raise c.fail(node, graph, f"int16 mul needs zero points 0 (TFLite Micro), got {zp_a}, {zp_b} -> {zp_o}")
        m, e = _quant.quantize_multiplier(s_a * s_b / s_o, rounding)
        return ElementwiseParams(**base, **zps, output_multiplier=m, output_shift=e)
    left_shift = LEFT_SHIFT_INT16 if dtype == "int16" else LEFT_SHIFT
    twice_max = 2.0 * max(s_a, s_b)
    ra, rb, ro = s_a / twice_max, s_b / twice_max, twice_max / ((1 << left_shift) * s_o)
    ma, ea = _quant.quantize_multiplier(ra, rounding)
    mb, eb = _quant.quantize_multiplier(rb, rounding)
    mo, eo = _quant.quantize_multiplier(ro, rounding)
    if max(ea, eb, eo) > 0:
        raise c.fail(node, graph, f"input/output scales {s_a:.9g}, {s_b:.9g} -> {s_o:.9g} need a multiplier above one")
    return ElementwiseParams(**base, **zps, left_shift=left_shift, a_multiplier=ma, a_shift=ea, b_multiplier=mb,
                             b_shift=eb, output_multiplier=mo, output_shift=eo)


def reference(p: ElementwiseParams, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if p.dtype == "float32":
        af, bf = a.astype(np.float32), b.astype(np.float32)
        y = af + bf if p.op == "add" else af - bf if p.op == "sub" else af * bf
        return c.clamp_float(np.broadcast_to(y, p.output_shape), float(p.act_min), float(p.act_max))
    if p.dtype == "int32":
        ai, bi = a.astype(np.int64), b.astype(np.int64)
        y = _quant.wrap32(ai + bi if p.op == "add" else ai - bi if p.op == "sub" else _quant.wrap32(ai) * bi)
        return np.broadcast_to(np.clip(y, p.act_min, p.act_max), p.output_shape).astype(np.int32)
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
    return np.broadcast_to(np.clip(y, p.act_min, p.act_max), p.output_shape).astype(p.dtype)
