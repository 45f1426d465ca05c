"""Unary activations: relu, relu6, clip(min, max), logistic, tanh; float32 and int8 (relu, relu6, logistic and
tanh also int16).

Every int8 unary op is a function of one int8 value, so `prepare` computes it once for all 256 inputs and
the kernel is a table lookup: `y = table[(uint8)x]` (`table[i]` is the output for the input whose two's
complement byte is i). The table is built with these semantics (TFLite's reference kernels):

* relu / relu6 / clip (`reference_ops::ReluX`): (m, e) = QuantizeMultiplier(double(s_in) / double(s_out));
  y = clamp(MBQM(x - zp_in, m, e) + zp_out, lo, hi) with lo = max(-128, zp_out + round(min / s_out)),
  hi = min(127, zp_out + round(max / s_out)) (round half away from zero, division in float32; no upper
  bound for relu).
* logistic / tanh: LiteRT's reference kernel ("single" mode) evaluates them through a float lookup table:
  y = clamp(round(f(s_in * (x - zp_in)) / s_out) + zp_out) with f computed in float32
  (logistic = 1 / (1 + exp(-v)); output scale 1/256, zero point -128; tanh: 1/128, 0). TFLM ("double"
  mode, `reference_integer_ops::Logistic/Tanh`): (m, e) = frexp(s_in * 2^27) (m rounded to Q31), radius =
  CalculateInputRadius(4, e); v = x - zp_in saturates beyond the radius, else gemmlowp's fixed-point
  logistic/tanh of MBQM(v, m, e) in Q4.27, rounded to 8 (logistic, - 128) or 7 (tanh) fraction bits.
* relu6 in "double" mode is TFLM's Relu6Quantized: y = clamp(x, zp_in, zp_in + round(6 / s_in)), in the
  input's domain (TFLM ignores the output's quantization); relu is ReluX above in both modes.

int16 (TFLM): relu/relu6 compute the formulas above per element (relu: zero points 0). logistic/tanh need
zero points 0 and output scale 2^-15; the input is rescaled to 1/(3 * 4096) per unit, (x * multiplier +
round) >> shift, and interpolated in TFLite's 256-entry table of sigmoid(i / 24) (Q0.16; tanh(x) =
2 sigmoid(2x) - 1): 9 (logistic) or 8 (tanh) fraction bits between entries, saturating past entry 255.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant

OPS: tuple[str, ...] = ("relu", "relu6", "logistic", "tanh", "clip")


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
    #: False: y = clamp(x, act_min, act_max) in the input's domain (TFLM's relu6)
    requantize: bool = True


def bounds(node: Node) -> tuple[float, float]:
    if node.op == "relu":
        return 0.0, float("inf")
    if node.op == "relu6":
        return 0.0, 6.0
    if node.op == "clip":
        return float(node.attrs.get("min", float("-inf"))), float(node.attrs.get("max", float("inf")))
    return float("-inf"), float("inf")


INT16_OPS = ("relu", "relu6", "logistic", "tanh")


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    c.check_count(node, graph, 1)
    x = c.req(node, graph, 0)
    c.check_dtype(node, graph, x, ("float32", "int8", "int16") if node.op in INT16_OPS else ("float32", "int8"),
                  "input")
    lo, hi = bounds(node)
    if lo > hi:
        raise c.fail(node, graph, f"clip min {lo} is above max {hi}")
    return [(tuple(x.shape), x.dtype)]


INT8_VALUES = np.arange(-128, 128, dtype=np.int64)


# TFLite's sigmoid_table_uint16: sigmoid(i / 24) in Q0.16 for i = 0..255, the table TFLM's int16 logistic and
# tanh (and its integer LSTM gates) interpolate in. These are TFLite's numbers as its interpreter uses them
# (read from the tflite-micro interpreter's data): 44 entries differ from a plain rounding of the formula and
# no rounding or midpoint-correction rule we tried reproduces them, and bit-exactness needs the very values.
# The one copy in utvm (utvm.ops.recurrent reads it from here).
SIGMOID_TABLE_U16: tuple[int, ...] = (
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432,
    42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475,
    49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485,
    55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519,
    59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036,
    62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
    63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308, 64357, 64405,
    64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179,
    65194, 65208, 65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337,
    65345, 65352, 65360, 65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425,
    65429, 65433, 65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
    65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516, 65517,
    65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524, 65525, 65525,
    65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533,
    65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65534, 65535,
)


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
    mode = rounding
    rounding = _quant.kernel_rounding(rounding, node.op)
    x, y = c.req(node, graph, 0), c.out(node, graph)
    lo, hi = bounds(node)
    base = dict(op=node.op, dtype=x.dtype, shape=tuple(x.shape), min=lo, max=hi, rounding=rounding)
    if x.dtype == "float32":
        return ActivationParams(**base)
    s_in, zp_in = c.per_tensor(node, graph, x, "input")
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    qmin, qmax = (-128, 127) if x.dtype == "int8" else (-32768, 32767)
    if node.op == "relu6" and mode == "double":
        # TFLM's Relu6Quantized clamps in the input's domain, ignoring the output's quantization
        six = min(qmax, max(qmin, _quant.quantize_scalar(6.0, s_in, zp_in)))
        vals = np.clip(INT8_VALUES, zp_in, six)
        return ActivationParams(**base, table=_table_of(vals) if x.dtype == "int8" else (), input_zero_point=zp_in,
                                output_zero_point=zp_out, act_min=zp_in, act_max=six, requantize=False)
    if x.dtype == "int16" and node.op == "relu" and (zp_in or zp_out):
        raise c.fail(node, graph, f"int16 relu needs zero points 0 (input {zp_in}, output {zp_out})")
    if node.op in ("logistic", "tanh") and x.dtype == "int16":
        return _prepare_lut16(node, graph, base, s_in, zp_in, s_out, zp_out)
    if node.op in ("logistic", "tanh"):
        want = (1.0 / 256, -128) if node.op == "logistic" else (1.0 / 128, 0)
        if (s_out, zp_out) != want:
            raise c.fail(node, graph, f"int8 {node.op} output {y.name!r} must have scale {want[0]} and zero point "
                                      f"{want[1]} (got {s_out:.9g}, {zp_out})")
        # TFLM ("double"): gemmlowp's fixed-point functions of the input in Q4.27; LiteRT: a float LUT
        values = (fixed_point_int8(node.op, s_in, zp_in) if mode == "double"
                  else _float_lut(node.op, s_in, zp_in, s_out, zp_out))
        return ActivationParams(**base, table=_table_of(values), input_zero_point=zp_in, output_zero_point=zp_out)
    m, e = _quant.quantize_multiplier(s_in / s_out, rounding)
    act_min = qmin if lo == float("-inf") else max(qmin, _quant.quantize_scalar(lo, s_out, zp_out))
    act_max = qmax if hi == float("inf") else min(qmax, _quant.quantize_scalar(hi, s_out, zp_out))
    table: tuple[int, ...] = ()
    if x.dtype == "int8":
        vals = _quant.multiply_by_quantized_multiplier(INT8_VALUES - zp_in, m, e, rounding) + zp_out
        table = _table_of(np.clip(vals, act_min, act_max))
    return ActivationParams(**base, table=table, input_zero_point=zp_in, output_zero_point=zp_out, multiplier=m,
                            shift=e, act_min=act_min, act_max=act_max)


def checked_log2(x: float) -> tuple[int, bool]:
    """TFLite CheckedLog2 (float32 math): (rounded log2, whether x is a power of two within 1e-3)."""
    f32 = np.float32
    lg = f32(np.log(f32(x))) * (f32(1.0) / f32(np.log(f32(2.0))))
    r = _quant.round_half_away(np.asarray(lg, np.float32))
    return int(r), bool(abs(f32(lg - r)) < f32(1e-3))


def fixed_point_int8(op: str, s_in: float, zp_in: int) -> np.ndarray:
    """TFLM's int8 logistic/tanh for inputs -128..127 (reference_integer_ops::Logistic/Tanh)."""
    q, left_shift = math.frexp(s_in * float(1 << 27))
    multiplier = _quant._round_half_away(q * (1 << 31))  # noqa: SLF001 - TfLiteRound
    radius = _quant.calculate_input_radius(4, left_shift, 31)
    v = INT8_VALUES - zp_in
    inside = (v > -radius) & (v < radius)
    q4 = _quant.multiply_by_quantized_multiplier(np.where(inside, v, 0), multiplier, left_shift, "double")
    if op == "logistic":
        out = _quant.rounding_divide_by_pot(_quant.logistic(q4, 4), 23) - 128
    else:
        out = _quant.rounding_divide_by_pot(_quant.tanh(q4, 4), 24)
    out = np.clip(out, -128, 127)
    return np.where(v <= -radius, -128, np.where(v >= radius, 127, out))


def _prepare_lut16(node: Node, graph: Graph, base: dict, s_in: float, zp_in: int, s_out: float,
                   zp_out: int) -> ActivationParams:
    """TFLM's int16 logistic/tanh Prepare: zero points 0, output scale 2^-15, the input rescaled to
    1/(3 * 4096) by a multiplier <= 32767 and a right shift (or 3 << shift for power-of-two scales)."""
    if zp_in or zp_out:
        raise c.fail(node, graph, f"int16 {node.op} needs zero points 0 (input {zp_in}, output {zp_out})")
    out_log2, out_pot = checked_log2(s_out)
    if not out_pot or out_log2 != -15:
        raise c.fail(node, graph, f"int16 {node.op} output scale must be 2^-15 (got {s_out:.9g})")
    log2, pot = checked_log2(s_in)
    shift = 12 + log2
    pot = pot and (shift == 0 or (node.op == "tanh" and shift == 1))
    if pot:
        multiplier, shift = 3 << shift, 0
    else:
        real = s_in * 4096.0 * 3.0
        shift = 0
        while real <= 32767.0 / 2.0 and shift <= 30:
            shift += 1
            real *= 2.0
        multiplier = int(real)
    if multiplier > 32767:
        raise c.fail(node, graph, f"int16 {node.op} input scale {s_in:.9g} is too large (TFLM needs "
                                  "scale * 12288 <= 32767)")
    return ActivationParams(**base, multiplier=multiplier, shift=shift, act_min=-32768, act_max=32767)


def lut16(op: str, x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """TFLM's int16 logistic/tanh (interpolation in sigmoid_table_uint16), vectorised."""
    table = np.asarray(SIGMOID_TABLE_U16, np.int64)
    rnd = (1 << (shift - 1)) if shift > 0 else 0
    v = (x.astype(np.int64) * multiplier + rnd) >> shift
    a = np.abs(v)
    bits = 9 if op == "logistic" else 8
    uh = a >> bits
    k = np.minimum(uh, 254)
    ua, ub = table[k], table[k + 1]
    ut = a & ((1 << bits) - 1)
    if op == "logistic":
        res = np.where(uh >= 255, 0x7FFF << 10, (ua << 9) + ut * (ub - ua))
        res = np.where(v >= 0, res + (1 << 9), (1 << 25) - res + (1 << 9) - 1)
        return (res >> 10).astype(np.int16)
    res = np.where(uh >= 255, 0xFFFF << 8, (ua << 8) + ut * (ub - ua))
    res = np.where(v >= 0, res - (1 << 23) + (1 << 7), -res + (1 << 23) + (1 << 7) - 1)
    return (res >> 8).astype(np.int16)


def reference(p: ActivationParams, x: np.ndarray) -> np.ndarray:
    if p.dtype == "int16" and p.op in ("logistic", "tanh"):
        return lut16(p.op, x, p.multiplier, p.shift)
    if p.dtype == "int16":
        v = x.astype(np.int64)
        if p.requantize:
            v = _quant.multiply_by_quantized_multiplier(v - p.input_zero_point, p.multiplier, p.shift, p.rounding)
            v = v + p.output_zero_point
        return np.clip(v, p.act_min, p.act_max).astype(np.int16)
    if p.dtype == "int8":
        return np.asarray(p.table, dtype=np.int64)[x.astype(np.uint8)].astype(np.int8)
    xf = x.astype(np.float32)
    if p.op == "logistic":
        return (1.0 / (1.0 + np.exp(-xf.astype(np.float64)))).astype(np.float32)
    if p.op == "tanh":
        return np.tanh(xf)
    return np.minimum(np.maximum(xf, np.float32(p.min)), np.float32(p.max)).astype(np.float32)
