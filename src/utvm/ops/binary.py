"""The binary op family: TFLite's ADD, SUB and MUL, and TFLite Micro's elementwise binary, comparison,
logical, select and add_n kernels.

Every op broadcasts its inputs with numpy's rules (TFLM's broadcast kernels go to rank 6); add_n needs
identical shapes. Canonical ops (attributes in brackets):

  add, sub, mul         (a, b) [activation]  float32, int8, int16, int32 (below); `ElementwiseParams`, compiled
                        by utvm.compiler.kernels.binary (every other op: `BinaryParams`, the same
                        module's generic kernel)
  maximum, minimum      (a, b)  float32 int8 int16 int32 int64: raw values, no requantization (TFLM
                        compares the stored integers, whatever the quantization); `a > b ? a : b`
                        (`a < b ? a : b`), so a NaN in b wins and a NaN in a loses.
  div                   (a, b) [activation]  float32, int32 (C truncating division, clamped to the
                        activation's int32 range), int8 (TFLM's reciprocal-based DivElementwise below)
  floor_div, floor_mod  (a, b)  float32: floor(a / b); fmod(a, b) moved to b's sign. floor_div fails at
                        run time (error code) when the denominator holds a 0, as TFLM's Eval does.
  squared_difference    (a, b)  float32, int32 ((a - b)^2, wrapping), int8 / int16 (below)
  equal, not_equal      (a, b) -> bool  float32 int8 int32 int64 bool
  greater, greater_equal, less, less_equal  (a, b) -> bool  float32 int8 int32 int64 (TFLM's GREATER also
                        takes int16, but its Prepare leaves the int16 rescaling unset and every element
                        compares 0 > 0: refused here, with that reason)
  logical_and, logical_or          (a, b) -> bool  bool
  select                (cond bool, x, y)  float32 int8 int16: cond ? x : y (TFLite SELECT_V2; raw values)
  add_n                 (x0, x1, ...)  float32 (summed left to right in float32), int8 (below)

add, sub, mul in detail (MBQM = MultiplyByQuantizedMultiplier in the kernel's rounding, QM = QuantizeMultiplier):

* int8 add / sub (TFLite `reference_integer_ops::AddElementwise`, `reference_ops::SubElementwise`), with
  left_shift = 20, twice_max = 2 * max(s_a, s_b) and each multiplier from QM (all <= 1):

      a' = MBQM((a - zp_a) << 20, m_a, e_a)          m_a, e_a = QM(s_a / twice_max)
      b' = MBQM((b - zp_b) << 20, m_b, e_b)          m_b, e_b = QM(s_b / twice_max)
      y  = clamp(MBQM(a' +/- b', m_o, e_o) + zp_o, act)   m_o, e_o = QM(twice_max / (2**20 * s_out))

* int8 mul (TFLite `reference_integer_ops::MulElementwise`):

      y  = clamp(MBQM((a - zp_a) * (b - zp_b), m, e) + zp_o, act)     m, e = QM(s_a * s_b / s_out)

* int16 (TFLite Micro): add / sub take the general int8 path with left_shift = 15 (TFLM never takes TFLite's
  power-of-two int16 path, whatever pot_scale_int16 says); mul as int8 with all zero points 0 (checked).
  The scale ratios are computed in double for SUB too: measured against the tflite-micro package (its int16
  SUB matches double ratios and not float32 ones, although recent sub_common.cc sources compute in float).
* int32 (unquantized; TFLM refuses quantization parameters on ADD/SUB inputs and SUB's output): two's
  complement wrapping a + b, a - b, a * b, clamped to the activation's int32 range (CalculateActivationRange
  <int32_t>: relu [0, INT32_MAX], relu6 [0, 6], relu_n1_to_1 [-1, 1]) for sub and mul. TFLM's int32 ADD
  ignores the fused activation (it clamps to the whole int32 range), and so does utvm.

The other ops' quantized details (MBQM with gemmlowp double rounding; every "< 1" multiplier is TFLM's
QuantizeMultiplierSmallerThanOneExp, checked):

* comparisons int8: each side is rescaled to a common domain, v' = MBQM((v - zp) << 8, m, e) with
  m, e = QM(scale of that input), then compared. TFLM requires each input scale < 1.
* squared_difference int8 (left shift 7) / int16 (left shift 0, zero points 0): a', b' rescaled as in int8
  add with twice_max = 2 * max(s_a, s_b); y = clamp(MBQM((a' - b')^2, QM(twice_max^2 / (2^(2L) s_o))) + zp_o).
* div int8: va = a - zp_a, vb = b - zp_b (both negated when vb < 0); inv, rs = GetReciprocal(vb, 31);
  h = CountLeadingSignBits(va); q = SRDHM(va << h, inv); y = clamp(zp_o + MBQM(q, m, e - rs - h), act) with
  m, e = QM(s_a / (s_b s_o)). The total shift can pass -31 (a = zp_a gives h = 31): RoundingDivideByPOT's
  mask then wraps to -1 in int32 arithmetic and 0 comes out as 1, exactly as TFLM computes it.
* add_n int8: all inputs share scale and zero point; acc = MBQM(-zp << 20, m_i, e_i) (TFLM starts the sum
  from the rescaled input offset, not from 0) + sum_j MBQM((x_j - zp) << 20, m_i, e_i),
  y = clamp(MBQM(acc, m_o, e_o) + zp_o) with m_i = QM(1/2), m_o = QM(2 s / (2^20 s_o)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node, Tensor
from utvm.ops import _common as c
from utvm.ops import _quant

#: TFLite's ADD, SUB, MUL: `ElementwiseParams` (their own kernels and schedule space in utvm.compiler.kernels.binary)
ELEMENTWISE: tuple[str, ...] = ("add", "sub", "mul")
COMPARISONS = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")
ARITH = ("maximum", "minimum", "div", "floor_div", "floor_mod", "squared_difference")
LOGICAL = ("logical_and", "logical_or")
#: the ops of `BinaryParams` (utvm.compiler.kernels.binary registers its kernel for exactly these); the
#: family's ops are OPS
BINARY: tuple[str, ...] = ARITH + COMPARISONS + LOGICAL + ("select", "add_n")
OPS: tuple[str, ...] = ELEMENTWISE + BINARY

# dtypes accepted per op (TFLM's Eval)
DTYPES: dict[str, tuple[str, ...]] = {
    "add": ("float32", "int8", "int16", "int32"),
    "sub": ("float32", "int8", "int16", "int32"),
    "mul": ("float32", "int8", "int16", "int32"),
    "maximum": ("float32", "int8", "int16", "int32", "int64"),
    "minimum": ("float32", "int8", "int16", "int32", "int64"),
    "div": ("float32", "int32", "int8"),
    "floor_div": ("float32",),
    "floor_mod": ("float32",),
    "squared_difference": ("float32", "int32", "int8", "int16"),
    "equal": ("float32", "int8", "int32", "int64", "bool"),
    "not_equal": ("float32", "int8", "int32", "int64", "bool"),
    "greater": ("float32", "int8", "int32", "int64"),
    "greater_equal": ("float32", "int8", "int32", "int64"),
    "less": ("float32", "int8", "int32", "int64"),
    "less_equal": ("float32", "int8", "int32", "int64"),
    "logical_and": ("bool",),
    "logical_or": ("bool",),
    "select": ("float32", "int8", "int16"),
    "add_n": ("float32", "int8"),
}
#: add / sub: the left shift of the rescaled inputs (int8; int16 uses LEFT_SHIFT_INT16)
LEFT_SHIFT = 20
LEFT_SHIFT_INT16 = 15
COMPARE_SHIFT = 8
ADD_N_SHIFT = 20
SQDIFF_SHIFT = {"int8": 7, "int16": 0}
INT32_MIN, INT32_MAX = _quant.INT32_MIN, _quant.INT32_MAX


@dataclass(frozen=True)
class BinaryAttrs:
    activation: str = "none"


@dataclass(frozen=True)
class ElementwiseParams:
    """An add, sub or mul node. `a_shape`/`b_shape` broadcast (numpy rules) to `output_shape`.

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


@dataclass(frozen=True)
class BinaryParams:
    """One node of the family. `shapes` are the input shapes (broadcast to `output_shape`), `dtype` the
    dtype computed on (x's for select), `out_dtype` the output's. Quantized paths: `zero_points` per input,
    `multipliers`/`shifts` per input (the input rescales), `left_shift`, `output_multiplier`/`output_shift`,
    `output_zero_point`; `act_min`/`act_max` the clamp (float32, int32 and quantized activations)."""

    op: str
    dtype: str
    out_dtype: str
    shapes: tuple[tuple[int, ...], ...]
    output_shape: tuple[int, ...]
    activation: str = "none"
    act_min: float | int = 0
    act_max: float | int = 0
    zero_points: tuple[int, ...] = ()
    multipliers: tuple[int, ...] = ()
    shifts: tuple[int, ...] = ()
    left_shift: int = 0
    output_multiplier: int = 0
    output_shift: int = 0
    output_zero_point: int = 0
    rounding: str = "double"

    @property
    def quantized(self) -> bool:
        return bool(self.zero_points)


def attrs_of(node: Node) -> BinaryAttrs:
    return BinaryAttrs(node.attrs.get("activation", "none"))


def _broadcast(node: Node, graph: Graph, ts: list[Tensor]) -> tuple[int, ...]:
    try:
        shape = np.broadcast_shapes(*(t.shape for t in ts))
    except ValueError:
        shapes = " and ".join(str(list(t.shape)) for t in ts)
        raise c.fail(node, graph, f"shapes {shapes} do not broadcast") from None
    return tuple(int(d) for d in shape)


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    op = node.op
    if op == "add_n":
        if len(node.inputs) < 2:
            raise c.fail(node, graph, f"takes at least 2 inputs, got {len(node.inputs)}")
        c.check_count(node, graph, len(node.inputs))
    else:
        c.check_count(node, graph, 3 if op == "select" else 2)
    ts = [c.req(node, graph, i) for i in range(len(node.inputs))]
    if op == "div" or op in ELEMENTWISE:
        c.activation(node, graph)
    elif node.attrs.get("activation", "none") != "none":
        raise c.fail(node, graph, f"{op} has no fused activation (got {node.attrs['activation']!r})")
    if op == "select":
        if ts[0].dtype != "bool":
            raise c.fail(node, graph, f"condition {ts[0].name!r} must be bool, not {ts[0].dtype}")
        data = ts[1:]
    else:
        data = ts
    if op == "greater" and data[0].dtype == "int16":
        raise c.fail(node, graph, "int16 greater is not supported: TFLite Micro accepts it but leaves the int16 "
                                  "rescaling unset (every result is false); supported: " + ", ".join(DTYPES[op]))
    c.check_dtype(node, graph, data[0], DTYPES[op], "input")
    for t in data[1:]:
        if t.dtype != data[0].dtype:
            raise c.fail(node, graph, f"inputs {data[0].name!r} ({data[0].dtype}) and {t.name!r} ({t.dtype}) "
                                      "differ in dtype")
    if op in ELEMENTWISE and data[0].dtype == "int32":
        y = c.out(node, graph)
        quantized = [t for t in ((ts[0], ts[1]) if op != "sub" else (ts[0], ts[1], y)) if t.quant is not None]
        if op != "mul" and quantized:
            raise c.fail(node, graph, f"int32 {op} must be unquantized (TFLite Micro), but {quantized[0].name!r} "
                                      "has quantization parameters")
    if op == "add_n":
        for t in ts[1:]:
            if tuple(t.shape) != tuple(ts[0].shape):
                raise c.fail(node, graph, f"add_n inputs must have one shape: {ts[0].name!r} is "
                                          f"{list(ts[0].shape)}, {t.name!r} is {list(t.shape)}")
        shape = tuple(ts[0].shape)
    else:
        shape = _broadcast(node, graph, ts)
    out = "bool" if op in COMPARISONS else data[0].dtype
    if data[0].dtype in ("int8", "int16") and op not in ("maximum", "minimum", "select") + ELEMENTWISE:
        _build(node, graph, shape, out, "double")  # quantization constraints fail at import, not at compile
    return [(shape, out)]


def _smaller_than_one(node: Node, graph: Graph, real: float, what: str) -> tuple[int, int]:
    """TFLM's QuantizeMultiplierSmallerThanOneExp: real in (0, 1), shift <= 0 (a TFLM CHECK otherwise)."""
    if not 0.0 < real < 1.0:
        raise c.fail(node, graph, f"{what} {real:.9g} must be in (0, 1) (TFLite Micro's "
                                  "QuantizeMultiplierSmallerThanOneExp)")
    m, e = _quant.quantize_multiplier(real, "double")
    if e > 0:
        raise c.fail(node, graph, f"{what} {real:.9g} needs a left shift")
    return m, e


def prepare(node: Node, graph: Graph, rounding: str = "single") -> BinaryParams | ElementwiseParams:
    ((oshape, out_dtype),) = infer(node, graph)
    rounding = _quant.kernel_rounding(rounding, node.op)
    if node.op in ELEMENTWISE:
        return _elementwise(node, graph, oshape, rounding)
    return _build(node, graph, oshape, out_dtype, rounding)


def _elementwise(node: Node, graph: Graph, oshape: tuple[int, ...], rounding: str) -> ElementwiseParams:
    """add, sub, mul (the module docstring)."""
    a, b, y = c.req(node, graph, 0), c.req(node, graph, 1), c.out(node, graph)
    dtype = a.dtype
    act = c.activation(node, graph)
    if dtype == "int32":
        lo, hi = _int32_activation_range("none" if node.op == "add" else act)  # TFLM's int32 ADD ignores it
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


def _build(node: Node, graph: Graph, oshape: tuple[int, ...], out_dtype: str, rounding: str) -> BinaryParams:
    op = node.op
    ts = [c.req(node, graph, i) for i in range(len(node.inputs))]
    y = c.out(node, graph)
    dtype = ts[1].dtype if op == "select" else ts[0].dtype
    base = dict(op=op, dtype=dtype, out_dtype=out_dtype, shapes=tuple(tuple(t.shape) for t in ts),
                output_shape=oshape, rounding=rounding)
    if op == "div":
        act = c.activation(node, graph)
        if dtype == "float32":
            lo, hi = _quant.activation_range_float(act)
            return BinaryParams(**base, activation=act, act_min=lo, act_max=hi)
        if dtype == "int32":
            lo, hi = _int32_activation_range(act)
            return BinaryParams(**base, activation=act, act_min=lo, act_max=hi)
        (sa, za), (sb, zb), (so, zo) = (c.per_tensor(node, graph, t, r) for t, r in
                                        ((ts[0], "input a"), (ts[1], "input b"), (y, "output")))
        lo, hi = _quant.activation_range_quantized(act, so, zo, "int8")
        # TFLM: static_cast<double>(float s_a / (float s_b * float s_o)), computed in float32
        real = float(np.float32(sa) / (np.float32(sb) * np.float32(so)))
        m, e = _quant.quantize_multiplier(real, "double")
        return BinaryParams(**base, activation=act, act_min=lo, act_max=hi, zero_points=(za, zb),
                            output_multiplier=m, output_shift=e, output_zero_point=zo)
    if op in COMPARISONS and dtype in ("int8", "int16"):
        zps, ms, es = [], [], []
        for t, role in ((ts[0], "input a"), (ts[1], "input b")):
            s, z = c.per_tensor(node, graph, t, role)
            m, e = _smaller_than_one(node, graph, s, f"{role} scale")
            zps.append(z)
            ms.append(m)
            es.append(e)
        return BinaryParams(**base, zero_points=tuple(zps), multipliers=tuple(ms), shifts=tuple(es),
                            left_shift=COMPARE_SHIFT)
    if op == "squared_difference" and dtype in ("int8", "int16"):
        (sa, za), (sb, zb), (so, zo) = (c.per_tensor(node, graph, t, r) for t, r in
                                        ((ts[0], "input a"), (ts[1], "input b"), (y, "output")))
        if dtype == "int16" and (za, zb, zo) != (0, 0, 0):
            raise c.fail(node, graph, f"int16 squared_difference needs zero points 0 (got {za}, {zb}, {zo})")
        ls = SQDIFF_SHIFT[dtype]
        twice_max = 2.0 * max(sa, sb)
        ma, ea = _smaller_than_one(node, graph, sa / twice_max, "input a multiplier")
        mb, eb = _smaller_than_one(node, graph, sb / twice_max, "input b multiplier")
        denom = float(np.float32(1 << (2 * ls)) * np.float32(so))  # int * float: float32 in TFLM
        mo, eo = _quant.quantize_multiplier(twice_max * twice_max / denom, "double")
        info = np.iinfo(np.dtype(dtype))
        return BinaryParams(**base, act_min=int(info.min), act_max=int(info.max), zero_points=(za, zb),
                            multipliers=(ma, mb), shifts=(ea, eb), left_shift=ls, output_multiplier=mo,
                            output_shift=eo, output_zero_point=zo)
    if op == "add_n" and dtype == "int8":
        s0, z0 = c.per_tensor(node, graph, ts[0], "input 0")
        for i, t in enumerate(ts[1:], 1):
            si, zi = c.per_tensor(node, graph, t, f"input {i}")
            if (si, zi) != (s0, z0):
                raise c.fail(node, graph, f"int8 add_n inputs must share quantization: {ts[0].name!r} has scale "
                                          f"{s0:.9g} zero point {z0}, {t.name!r} has {si:.9g}, {zi}")
        so, zo = c.per_tensor(node, graph, y, "output")
        twice_max = 2.0 * s0
        mi, ei = _smaller_than_one(node, graph, s0 / twice_max, "input multiplier")
        mo, eo = _smaller_than_one(node, graph, twice_max / ((1 << ADD_N_SHIFT) * so), "output multiplier")
        return BinaryParams(**base, act_min=-128, act_max=127, zero_points=(z0,) * len(ts),
                            multipliers=(mi,), shifts=(ei,), left_shift=ADD_N_SHIFT, output_multiplier=mo,
                            output_shift=eo, output_zero_point=zo)
    return BinaryParams(**base)


def _int32_activation_range(act: str) -> tuple[int, int]:
    """TFLite CalculateActivationRange<int32_t>."""
    return {"none": (INT32_MIN, INT32_MAX), "relu": (0, INT32_MAX), "relu6": (0, 6),
            "relu_n1_to_1": (-1, 1)}[act]


# --- reference ------------------------------------------------------------------------------------------------

def rdbpot_wide(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT as TFLM's int32 code computes it for any exponent >= 0: above 31 the mask
    (1ll << e) - 1 truncates to int32 -1 and the shift count wraps modulo 32 (x86, the oracle's host)."""
    x = np.asarray(x, np.int64)
    e = np.asarray(exponent, np.int64)
    mask = np.where(e >= 32, -1, (np.int64(1) << np.minimum(e, 31)) - 1)
    remainder = _quant.wrap32(x & mask)
    threshold = (mask >> 1) + (x < 0)
    return (x >> (e & 31)) + (remainder > threshold)


def mbqm_wide(x: np.ndarray, m: int, shift: np.ndarray) -> np.ndarray:
    shift = np.asarray(shift, np.int64)
    left = np.maximum(shift, 0)
    hi = _quant.saturating_rounding_doubling_high_mul(_quant.wrap32(np.asarray(x, np.int64) << left), m)
    return rdbpot_wide(hi, np.maximum(-shift, 0))


def count_leading_sign_bits(v: np.ndarray) -> np.ndarray:
    """TFLite CountLeadingSignBits of int32 values (31 for 0)."""
    v = np.asarray(v, np.int64)
    pos = _quant.count_leading_zeros_u32(v) - 1
    neg = _quant.count_leading_zeros_u32(2 * (-v) - 1)
    return np.where(v >= 0, pos, np.where(v == INT32_MIN, 0, neg))


def div_int8(p: BinaryParams, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    va = a.astype(np.int64) - p.zero_points[0]
    vb = b.astype(np.int64) - p.zero_points[1]
    neg = vb < 0
    va = np.where(neg, -va, va)
    vb = np.where(neg, -vb, vb)
    vb_safe = np.where(vb == 0, 1, vb)  # TFLM DCHECKs vb != 0 (undefined); utvm divides by 1
    inv, rs = _quant.get_reciprocal(vb_safe, 31)
    h = count_leading_sign_bits(va)
    q = _quant.saturating_rounding_doubling_high_mul(_quant.wrap32(va << h), inv)
    y = p.output_zero_point + mbqm_wide(q, p.output_multiplier, p.output_shift - rs - h)
    return np.clip(y, p.act_min, p.act_max)


def rescale_input(x: np.ndarray, zero_point: int, left_shift: int, multiplier: int, shift: int,
                  rounding: str) -> np.ndarray:
    """An input of add/sub, squared_difference, add_n or a comparison in the common domain:
    MBQM((x - zp) << left_shift, multiplier, shift)."""
    v = x.astype(np.int64) - zero_point
    return _quant.multiply_by_quantized_multiplier(v << left_shift, multiplier, shift, rounding)


def _rescale(p: BinaryParams, x: np.ndarray, i: int) -> np.ndarray:
    return rescale_input(x, p.zero_points[i], p.left_shift, p.multipliers[i], p.shifts[i], p.rounding)


def _int_div_trunc(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.int64), b.astype(np.int64)
    b_safe = np.where(b == 0, 1, b)  # division by 0 is undefined in TFLM; utvm yields 0
    q = np.abs(a) // np.abs(b_safe) * np.sign(a) * np.sign(b_safe)
    return np.where(b == 0, 0, _quant.wrap32(q))


def reference(p: BinaryParams | ElementwiseParams, *arrays: np.ndarray) -> np.ndarray:
    if isinstance(p, ElementwiseParams):
        return _elementwise_reference(p, *arrays)
    op = p.op
    out_np = np.dtype(p.out_dtype)
    if op == "add_n":
        if p.dtype == "float32":
            acc = np.zeros(p.output_shape, np.float32)
            for x in arrays:
                acc = (acc + x.astype(np.float32)).astype(np.float32)
            return acc
        acc = _quant.multiply_by_quantized_multiplier(np.full(p.output_shape, -p.zero_points[0], np.int64)
                                                      << p.left_shift, p.multipliers[0], p.shifts[0], p.rounding)
        for x in arrays:
            acc = acc + _rescale(p, x, 0)
        acc = _quant.wrap32(acc)
        y = _quant.multiply_by_quantized_multiplier(acc, p.output_multiplier, p.output_shift, p.rounding)
        return np.clip(y + p.output_zero_point, p.act_min, p.act_max).astype(np.int8)
    if op == "select":
        cond, x, yv = arrays
        return np.broadcast_to(np.where(cond.astype(bool), x, yv), p.output_shape).astype(out_np)
    a, b = arrays
    if op in LOGICAL:
        fn = np.logical_and if op == "logical_and" else np.logical_or
        return np.broadcast_to(fn(a.astype(bool), b.astype(bool)), p.output_shape).copy()
    if op in COMPARISONS:
        if p.quantized:
            a, b = _rescale(p, a, 0), _rescale(p, b, 1)
        fn = {"equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
              "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal}[op]
        return np.broadcast_to(fn(a, b), p.output_shape).copy()
    a, b = np.broadcast_arrays(a, b)
    if op in ("maximum", "minimum"):
        y = np.where(a > b, a, b) if op == "maximum" else np.where(a < b, a, b)
        return y.astype(out_np)
    if p.dtype == "float32":
        af, bf = a.astype(np.float32), b.astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if op == "div":
                return c.clamp_float(af / bf, float(p.act_min), float(p.act_max))
            if op == "floor_div":
                if np.any(b == 0):
                    raise ZeroDivisionError("floor_div: division by 0 (TFLite Micro fails the invocation)")
                return np.floor(af / bf).astype(np.float32)
            if op == "floor_mod":
                t = np.fmod(af, bf)
                return np.where((t != 0) & ((bf < 0) != (t < 0)), t + bf, t).astype(np.float32)
            d = af - bf
            return (d * d).astype(np.float32)
    if p.dtype == "int32":
        if op == "div":
            return np.clip(_int_div_trunc(a, b), p.act_min, p.act_max).astype(np.int32)
        d = _quant.wrap32(a.astype(np.int64) - b.astype(np.int64))
        return _quant.wrap32(d * d).astype(np.int32)
    if op == "div":
        return div_int8(p, a, b).astype(out_np)
    # squared_difference int8 / int16
    d = _quant.wrap32(_rescale(p, a, 0) - _rescale(p, b, 1))
    y = _quant.multiply_by_quantized_multiplier(_quant.wrap32(d * d), p.output_multiplier, p.output_shift,
                                                p.rounding)
    return np.clip(y + p.output_zero_point, p.act_min, p.act_max).astype(out_np)


def _elementwise_reference(p: ElementwiseParams, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if p.dtype == "float32":
        af, bf = a.astype(np.float32), b.astype(np.float32)
        y = af + bf if p.op == "add" else af - bf if p.op == "sub" else af * bf
        return c.clamp_float(np.broadcast_to(y, p.output_shape), float(p.act_min), float(p.act_max))
    if p.dtype == "int32":
        ai, bi = a.astype(np.int64), b.astype(np.int64)
        y = _quant.wrap32(ai + bi if p.op == "add" else ai - bi if p.op == "sub" else _quant.wrap32(ai) * bi)
        return np.broadcast_to(np.clip(y, p.act_min, p.act_max), p.output_shape).astype(np.int32)
    if p.op == "mul":
        raw = (a.astype(np.int64) - p.a_zero_point) * (b.astype(np.int64) - p.b_zero_point)
    else:
        sa = rescale_input(a, p.a_zero_point, p.left_shift, p.a_multiplier, p.a_shift, p.rounding)
        sb = rescale_input(b, p.b_zero_point, p.left_shift, p.b_multiplier, p.b_shift, p.rounding)
        raw = sa + sb if p.op == "add" else sa - sb
    y = _quant.multiply_by_quantized_multiplier(raw, p.output_multiplier, p.output_shift, p.rounding)
    y = y + p.output_zero_point
    return np.broadcast_to(np.clip(y, p.act_min, p.act_max), p.output_shape).astype(p.dtype)
