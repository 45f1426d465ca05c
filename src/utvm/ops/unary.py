"""The unary op family: element-wise math and activations of one tensor (plus prelu's alpha), with TFLite
Micro's semantics (tensorflow/lite/micro/kernels/{elementwise,neg,ceil,floor,round,exp,elu,hard_swish,
leaky_relu,prelu,cast,zeros_like,log_softmax}.cc and the reference kernels they call).

Ops and dtypes (TFLM refuses every other combination, and so does `infer`, naming the node):

  abs         float32; int8 (quantized); int16 (quantized with zero points 0, or not quantized: |x| wrapping)
  rsqrt       float32; int8, int16 (quantized)
  neg, ceil, floor, round, sqrt, square, exp, log, sin, cos     float32
  elu, hard_swish     float32, int8
  leaky_relu  float32, int8, int16            alpha=float
  prelu       (x, alpha) float32; int8 (int8 alpha); int16 (int8 alpha); alpha broadcasts to x (rank <= 4)
  logical_not bool
  cast        float32/int8/int16/int32/uint32/bool -> the same set    to=str (the output dtype; uint32 as the
              audio front end's energy masks use it)
  zeros_like  float32, int8, int32, int64
  log_softmax float32, int8 over the last axis (int8 output scale 16/256, zero point 127)

Float semantics are the C library's (`round` is half to even, TFLM's RoundToNearest; `elu` uses expm1;
hard_swish = x * min(6, max(0, x + 3)) / 6; leaky_relu = x > 0 ? x : alpha * x; prelu = x >= 0 ? x :
alpha * x). `cast` is C's conversion: float -> integer truncates (out-of-range values are undefined
behaviour in TFLM and here), narrowing integer casts wrap, anything -> bool is `!= 0`; quantization
parameters are ignored, as TFLM does.

int8 ops of one input are a function of one byte: `prepare` computes the 256 outputs (`table`, indexed by
the input byte) with TFLM's own arithmetic, and both the reference and the C kernel look them up:

* abs (`AbsEvalQuantized`): v = |x - zp_in|; y = clamp(v + zp_out) when the scales are equal (float
  compare), else clamp(MBQM(v, QuantizeMultiplier(double(s_in) / double(s_out))) + zp_out).
* rsqrt (`RsqrtEvalQuantized`): v = x - zp_in; v == 0 gives the type's max; otherwise (m, k) =
  GetInvSqrtQuantizedMultiplierExp(v, -1) (gemmlowp Newton-Raphson, five steps in Q3.28),
  y = clamp(MBQM(MBQM(1, m, k + 20), M, e - 20) + zp_out) with (M, e) = QuantizeMultiplier(1 /
  (sqrt(s_in) * s_out)) in double. TFLM stops with an error for v < 0; utvm gives the max there.
* elu: TFLM's float LUT: y = clamp(round_half_away(f(s_in * (x - zp_in)) * (1 / s_out)) + zp_out), all in
  float32, f(v) = v < 0 ? exp(v) - 1 : v.
* hard_swish (`reference_ops::HardSwish`): the int16 fixed-point pipeline (hires input x * 2^7, the
  "reluish" multiplier into [-1, 1] with saturating shifts, SaturatingDoublingHighMul, output shift), with
  the multipliers computed in float32 then QuantizeMultiplier and DownScaleInt32ToInt16Multiplier; the
  output exponent must be <= 0 (TFLM's check). gemmlowp's RoundingDivideByPOT on int16 truncates its mask
  to 16 bits, so a shift of 16 or more gives +-1, not 0 (reproduced).
* leaky_relu (`QuantizeLeakyRelu`): v = x - zp_in; y = clamp(zp_out + MBQM(v, m_id, e_id)) for v >= 0 and
  MBQM(v, m_alpha, e_alpha) otherwise, with QuantizeMultiplier of s_in / s_out and s_in * alpha / s_out
  computed in double (measured: TFLM's float32 expression is not rounded to float32), a negative alpha
  giving a negative multiplier.

int16 abs, rsqrt and leaky_relu and the quantized prelu compute the same formulas per element in C (their
parameters are in the params). prelu: v = x - zp_in; y = MBQM(v, m1, e1) for v >= 0, else
MBQM(v * (a - zp_a), m2, e2); + zp_out, clamp; m1 = s_in / s_out, m2 = s_in * s_a / s_out in double.

log_softmax int8 (`reference_ops::LogSoftmax`, gemmlowp): per row, d = x - max; the sum of
exp_on_negative_values(MBQM(d, m, e)) over d >= diff_min in Q12.19, its log
(log_x_for_x_greater_than_or_equal_to_1, Q5.26), then y = clamp(RoundingDivideByPOT(MBQM(d, m, e) -
log_sum, 22) + 127) for d > adjusted_diff_min, else -128.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant

OPS: tuple[str, ...] = ("abs", "neg", "ceil", "floor", "round", "sqrt", "rsqrt", "square", "exp", "log", "sin",
                        "cos", "elu", "hard_swish", "leaky_relu", "prelu", "logical_not", "cast", "zeros_like",
                        "log_softmax")

FLOAT_ONLY = ("neg", "ceil", "floor", "round", "sqrt", "square", "exp", "log", "sin", "cos")
DTYPES: dict[str, tuple[str, ...]] = {
    **{op: ("float32",) for op in FLOAT_ONLY},
    "abs": ("float32", "int8", "int16"),
    "rsqrt": ("float32", "int8", "int16"),
    "elu": ("float32", "int8"),
    "hard_swish": ("float32", "int8"),
    "leaky_relu": ("float32", "int8", "int16"),
    "prelu": ("float32", "int8", "int16"),
    "logical_not": ("bool",),
    "cast": ("float32", "int8", "int16", "int32", "uint32", "bool"),
    "zeros_like": ("float32", "int8", "int32", "int64"),
    "log_softmax": ("float32", "int8"),
}
CAST_TYPES = ("float32", "int8", "int16", "int32", "uint32", "bool")
INT8_VALUES = np.arange(-128, 128, dtype=np.int64)


@dataclass(frozen=True)
class UnaryAttrs:
    alpha: float = 0.0   # leaky_relu
    to: str = ""         # cast


@dataclass(frozen=True)
class UnaryParams:
    """One unary kernel. `kind` says how it computes:

    "float" (float32 math), "table" (int8: `table` holds the 256 outputs indexed by the input byte),
    "abs16" / "rsqrt16" / "leaky16" (int16 arithmetic per element), "prelu" (quantized prelu, int8 or int16,
    `alpha_shape` broadcast to `shape`), "abs16raw" (unquantized int16 abs), "logical_not", "cast",
    "zeros", "log_softmax" (int8, over the last axis).
    """

    op: str
    kind: str
    dtype: str
    out_dtype: str
    shape: tuple[int, ...]
    alpha_shape: tuple[int, ...] = ()
    alpha: float = 0.0
    table: tuple[int, ...] = ()
    input_zero_point: int = 0
    output_zero_point: int = 0
    alpha_zero_point: int = 0
    multiplier: int = 0
    shift: int = 0
    multiplier_alpha: int = 0
    shift_alpha: int = 0
    rescale: bool = True
    input_multiplier: int = 0
    input_left_shift: int = 0
    reverse_scaling_divisor: int = 0
    reverse_scaling_right_shift: int = 0
    diff_min: int = 0
    rounding: str = "double"


def attrs_of(node: Node) -> UnaryAttrs:
    return UnaryAttrs(float(node.attrs.get("alpha", 0.0)), str(node.attrs.get("to", "")))


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    op = node.op
    c.check_count(node, graph, 2 if op == "prelu" else 1)
    x = c.req(node, graph, 0)
    c.check_dtype(node, graph, x, DTYPES[op], "input")
    shape = tuple(x.shape)
    if op == "cast":
        to = attrs_of(node).to
        if to not in CAST_TYPES:
            raise c.fail(node, graph, f"cast to {to or '(missing)'} is not supported; supported: "
                                      f"{', '.join(CAST_TYPES)}")
        return [(shape, to)]
    if op == "prelu":
        a = c.req(node, graph, 1)
        want = ("float32",) if x.dtype == "float32" else ("int8",)
        c.check_dtype(node, graph, a, want, "alpha")
        if len(shape) > 4 or len(a.shape) > 4:
            raise c.fail(node, graph, f"prelu supports rank <= 4 (input {list(shape)}, alpha {list(a.shape)})")
        try:
            shape = tuple(int(d) for d in np.broadcast_shapes(shape, tuple(a.shape)))
        except ValueError:
            raise c.fail(node, graph, f"alpha {a.name!r} of shape {list(a.shape)} does not broadcast to input "
                                      f"shape {list(x.shape)}") from None
    if op == "log_softmax" and len(shape) < 1:
        raise c.fail(node, graph, "log_softmax needs an input of rank >= 1")
    if op == "leaky_relu" and not math.isfinite(attrs_of(node).alpha):
        raise c.fail(node, graph, f"alpha {attrs_of(node).alpha} must be finite")
    return [(shape, x.dtype)]


# --- TFLM's arithmetic, vectorised ------------------------------------------------------------------------
def quantize_multiplier_signed(real: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier for a possibly negative double (leaky_relu's alpha): frexp and the
    half-away rounding are odd functions, so it is the positive result negated."""
    if real >= 0:
        return _quant.quantize_multiplier(real, "double")
    q, shift = math.frexp(real)
    q_fixed = _quant._round_half_away(q * (1 << 31))  # noqa: SLF001 - the one std::round of TFLite
    if shift < -31:
        return 0, 0
    return int(q_fixed), int(shift)


def _mbqm(x: np.ndarray | int, m: int, s: int) -> np.ndarray:
    return _quant.multiply_by_quantized_multiplier(x, m, s, "double")


def _table_of(values: np.ndarray) -> tuple[int, ...]:
    """Outputs for inputs -128..127 reordered into a table indexed by the input's byte."""
    table = np.empty(256, dtype=np.int64)
    table[INT8_VALUES & 0xFF] = values
    return c.ints(table)


def _abs_quant(v: np.ndarray, p: UnaryParams, lo: int, hi: int) -> np.ndarray:
    a = np.abs(np.asarray(v, np.int64) - p.input_zero_point)
    if p.rescale:
        a = _mbqm(a, p.multiplier, p.shift)
    return np.clip(a + p.output_zero_point, lo, hi)


def rsqrt_quantized(x: np.ndarray, p: UnaryParams, lo: int, hi: int) -> np.ndarray:
    v = np.asarray(x, np.int64) - p.input_zero_point
    m, k = _quant.inv_sqrt_multiplier_exp(np.maximum(v, 0))
    out = np.empty(v.shape, np.int64)
    for km in np.unique(k):  # MBQM wants one shift at a time for its left/right split; few distinct values
        sel = k == km
        data = _quant.multiply_by_quantized_multiplier(1, m[sel], km + 20, "double")
        out[sel] = _mbqm(data, p.multiplier, p.shift - 20) + p.output_zero_point
    out = np.clip(out, lo, hi)
    return np.where(v <= 0, hi, out)


def _leaky_quant(x: np.ndarray, p: UnaryParams, lo: int, hi: int) -> np.ndarray:
    v = np.asarray(x, np.int64) - p.input_zero_point
    pos = _mbqm(v, p.multiplier, p.shift)
    neg = _mbqm(v, p.multiplier_alpha, p.shift_alpha)
    return np.clip(p.output_zero_point + np.where(v >= 0, pos, neg), lo, hi)


def _float_lut(fn, s_in: float, zp_in: int, s_out: float, zp_out: int) -> np.ndarray:  # noqa: ANN001
    """TFLM's PopulateLookupTable (int8): float32 dequantize, float32 transform, round, requantize, clamp."""
    deq = np.float32(s_in) * (INT8_VALUES - zp_in).astype(np.float32)
    t = fn(deq)
    inv = np.float32(1.0) / np.float32(s_out)
    rescaled = _quant.round_half_away((t * inv).astype(np.float32))
    return np.clip((rescaled + np.float32(zp_out)).astype(np.int64), -128, 127)


def _elu_f32(v: np.ndarray) -> np.ndarray:
    e = np.exp(np.minimum(v, 0).astype(np.float64)).astype(np.float32)
    return np.where(v < np.float32(0), e - np.float32(1), v).astype(np.float32)


# hard_swish: int16 fixed point of reference_ops::HardSwish --------------------------------------------------
def _i16(v: np.ndarray) -> np.ndarray:
    return ((np.asarray(v, np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def _srdhm16(a: np.ndarray, b: int) -> np.ndarray:
    a = np.asarray(a, np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    v = ab + nudge
    hi = np.where(v >= 0, v >> 15, -((-v) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, hi)


def _sdhm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ab = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    q = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, _i16(q))


def _rdbpot16(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT on int16 values: the mask (2^e - 1) is truncated to int16, so for
    e >= 16 it is -1 and the result is 1 for x >= 0 and -1 for x < 0 (what TFLM computes)."""
    x = np.asarray(x, np.int64)
    mask = int(_i16((1 << exponent) - 1))
    remainder = _i16(x & mask)
    threshold = (mask >> 1) + (x < 0)
    return _i16((x >> exponent) + (remainder > threshold))


def _sat_left_shift16(v: np.ndarray, amount: int) -> np.ndarray:
    return np.clip(np.asarray(v, np.int64) * (1 << amount), -32768, 32767)


def downscale_to_int16(m: int) -> int:
    """TFLite DownScaleInt32ToInt16Multiplier."""
    if m >= (1 << 31) - 1 - (1 << 15):
        return 32767
    return (m + (1 << 15)) >> 16


def hard_swish_multipliers(s_in: float, s_out: float) -> tuple[int, int, int, int]:
    """(output multiplier int16, output exponent, reluish multiplier int16, reluish exponent), from float32
    scales as TFLM's HardSwishPrepare computes them."""
    hires = np.float32(1.0 / 128.0) * np.float32(s_in)
    reluish_scale = np.float32(3.0) / np.float32(32768.0)
    om, oe = _quant.quantize_multiplier(float(np.float32(hires / np.float32(s_out))), "double")
    rm, re_ = _quant.quantize_multiplier(float(np.float32(hires / reluish_scale)), "double")
    return downscale_to_int16(om), oe, downscale_to_int16(rm), re_


def hard_swish_int8(x: np.ndarray, zp_in: int, zp_out: int, om: int, oe: int, rm: int, re_: int) -> np.ndarray:
    v = _i16(np.asarray(x, np.int64) - zp_in)
    hires = _i16(v * (1 << 7))
    preshift = _srdhm16(hires, om)
    reluish = hires
    if re_ > 0:
        reluish = _sat_left_shift16(reluish, re_ - 1)
    reluish = _srdhm16(reluish, rm)
    if re_ > 0:
        reluish = _sat_left_shift16(reluish, 1)
    if re_ < 0:
        reluish = _rdbpot16(reluish, -re_)
    reluish = (reluish + (1 << 15)) >> 1
    pre_out = _sdhm16(reluish, preshift)
    out = _i16(_rdbpot16(pre_out, -oe) + zp_out)
    return np.clip(out, -128, 127)


# log_softmax: gemmlowp's log ----------------------------------------------------------------------------
LOG_SOFTMAX_OUTPUT = (16.0 / 256, 127)


# log_softmax int8: TFLite's reference_ops::LogSoftmax with gemmlowp's log --------------------------------
def _sat_add32(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    return np.clip(np.asarray(a, np.int64) + b, _quant.INT32_MIN, _quant.INT32_MAX)


def log_x_ge_1_q12_to_q5(z: np.ndarray) -> np.ndarray:
    """TFLite log_x_for_x_greater_than_or_equal_to_1<5>(FixedPoint<int32, 12> z): log(z) in Q5.26 raw."""
    srdhm = _quant.saturating_rounding_doubling_high_mul
    pot = _quant.saturating_rounding_multiply_by_pot
    wrap = _quant.wrap32
    in_bits, accum_bits = 12, 6
    log_2, sqrt_sqrt_half, sqrt_half = 1488522236, 1805811301, 1518500250
    alpha_n, alpha_d, alpha_i, alpha_f = 117049297, 127690142, 1057819769, 638450708
    shifted_quarter = int(_quant.rounding_divide_by_pot(536870912, accum_bits))
    z = np.asarray(z, np.int64)

    def pot_param(x: np.ndarray, e: np.ndarray) -> np.ndarray:
        x, e = np.broadcast_arrays(np.asarray(x, np.int64), np.asarray(e, np.int64))
        out = x.copy()
        for ev in np.unique(e):
            sel = e == ev
            out[sel] = pot(x[sel], int(ev))
        return out

    clz_a = _quant.count_leading_zeros_u32(z)
    r_a = pot(srdhm(pot_param(z, clz_a - 1), sqrt_half), 1)
    z_a_pow = _sat_add32(pot_param(in_bits - clz_a, 31 - accum_bits), shifted_quarter)
    z_b = srdhm(z, sqrt_half)
    z_b_headroom = _quant.count_leading_zeros_u32(z_b) - 1
    r_b = pot_param(z, z_b_headroom)
    z_b_pow = _sat_add32(pot_param(in_bits - z_b_headroom, 31 - accum_bits), -shifted_quarter)
    r = np.minimum(r_a, r_b)
    z_pow = np.maximum(z_a_pow, z_b_pow)
    p = _quant._rounding_half_sum(r, sqrt_sqrt_half)  # noqa: SLF001 - gemmlowp RoundingHalfSum
    q = wrap(r - sqrt_sqrt_half)
    q = wrap(q + q)
    common_sq = srdhm(q, q)
    num = wrap(srdhm(q, r) + srdhm(srdhm(q, common_sq), alpha_n))
    denom = wrap(srdhm(p, wrap(wrap(alpha_i + q) + srdhm(alpha_d, common_sq))) + srdhm(alpha_f, q))
    recip = _quant.one_over_one_plus_x_for_x_in_0_1(denom)
    num_scaled = _quant.rounding_divide_by_pot(num, accum_bits)
    return pot(wrap(srdhm(z_pow, log_2) + srdhm(num_scaled, recip)), 1)


def log_softmax_params(s_in: float) -> tuple[int, int, int, int, int]:
    """TFLM's LogSoftmax Prepare (PreprocessLogSoftmaxScalingExp, beta 1, 5 integer bits): (input multiplier,
    input left shift, reverse scaling divisor, reverse scaling right shift, diff_min)."""
    real = min(1.0 * s_in * float(1 << (31 - 5)), float((1 << 31) - 1))
    m, e = _quant.quantize_multiplier_greater_than_one(real, "double")
    reverse = float(1 << (31 - e)) / float(m)
    rd, rs = _quant.quantize_multiplier(reverse, "double")
    if not (0 < reverse < 1 and rs <= 0):
        raise ValueError(f"log_softmax reverse scaling {reverse!r} is outside (0, 1)")
    diff_min = -_quant.calculate_input_radius(5, e)
    return m, e, rd, -rs, diff_min


def log_softmax_int8(p: UnaryParams, x: np.ndarray) -> np.ndarray:
    xi = x.astype(np.int64)
    diff = xi - xi.max(axis=-1, keepdims=True)
    scaled = _quant.multiply_by_quantized_multiplier(diff, p.input_multiplier, p.input_left_shift, "double")
    exp = _quant.rounding_divide_by_pot(_quant.exp_on_negative_values(scaled, 5), 12)
    total = _quant.wrap32(np.where(diff >= p.diff_min, exp, 0).sum(axis=-1, keepdims=True))
    log_sum = log_x_ge_1_q12_to_q5(total)
    adjusted = np.maximum(p.diff_min - 1, _quant.multiply_by_quantized_multiplier(
        _quant.wrap32(log_sum + _quant.INT32_MIN), p.reverse_scaling_divisor, -p.reverse_scaling_right_shift,
        "double"))
    out = _quant.rounding_divide_by_pot(_quant.wrap32(scaled - log_sum), 31 - 5 - 4) + 127
    return np.where(diff > adjusted, np.clip(out, -128, 127), -128).astype(np.int8)


# --- prepare / reference ------------------------------------------------------------------------------------
def prepare(node: Node, graph: Graph, rounding: str = "single") -> UnaryParams:
    (shape, out_dtype), = infer(node, graph)
    op = node.op
    x, y = c.req(node, graph, 0), c.out(node, graph)
    at = attrs_of(node)
    base = dict(op=op, dtype=x.dtype, out_dtype=out_dtype, shape=shape, alpha=at.alpha, rounding="double")
    if op == "cast":
        return UnaryParams(kind="cast", **base)
    if op == "zeros_like":
        return UnaryParams(kind="zeros", **base)
    if op == "logical_not":
        return UnaryParams(kind="logical_not", **base)
    if op == "prelu":
        a = c.req(node, graph, 1)
        base["alpha_shape"] = tuple(a.shape)
        if x.dtype == "float32":
            return UnaryParams(kind="float", **base)
        s_in, zp_in = c.per_tensor(node, graph, x, "input")
        s_a, zp_a = c.per_tensor(node, graph, a, "alpha")
        s_out, zp_out = c.per_tensor(node, graph, y, "output")
        m1, e1 = _quant.quantize_multiplier(s_in / s_out, "double")
        m2, e2 = _quant.quantize_multiplier(s_in * s_a / s_out, "double")
        return UnaryParams(kind="prelu", input_zero_point=zp_in, alpha_zero_point=zp_a, output_zero_point=zp_out,
                           multiplier=m1, shift=e1, multiplier_alpha=m2, shift_alpha=e2, **base)
    if x.dtype == "float32":
        return UnaryParams(kind="float", **base)
    if op == "abs" and x.dtype == "int16" and x.quant is None:
        if y.quant is not None:
            raise c.fail(node, graph, f"int16 abs: input {x.name!r} is not quantized but output {y.name!r} is")
        return UnaryParams(kind="abs16raw", **base)
    s_in, zp_in = c.per_tensor(node, graph, x, "input")
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    if x.dtype == "int16" and op in ("abs", "rsqrt") and (zp_in or zp_out):
        raise c.fail(node, graph, f"int16 {op} needs zero points 0 (input {zp_in}, output {zp_out})")
    q = dict(input_zero_point=zp_in, output_zero_point=zp_out)
    lo, hi = (-128, 127) if x.dtype == "int8" else (-32768, 32767)
    if op == "abs":
        rescale = np.float32(s_in) != np.float32(s_out)
        m, e = _quant.quantize_multiplier(s_in / s_out, "double") if rescale else (0, 0)
        p = UnaryParams(kind="abs16", rescale=bool(rescale), multiplier=m, shift=e, **q, **base)
        if x.dtype == "int8":
            return _with_table(p, _abs_quant(INT8_VALUES, p, lo, hi))
        return p
    if op == "rsqrt":
        m, e = _quant.quantize_multiplier(1.0 / (math.sqrt(s_in) * s_out), "double")
        p = UnaryParams(kind="rsqrt16", multiplier=m, shift=e, **q, **base)
        if x.dtype == "int8":
            return _with_table(p, rsqrt_quantized(INT8_VALUES, p, lo, hi))
        return p
    if op == "leaky_relu":
        # in double: TFLM's float32 source expression measurably is not rounded to float32 (alpha 2.0,
        # scales 0.05 / 0.04 tie-break like the double quotient)
        ident = s_in / s_out
        alpha_real = s_in * float(np.float32(at.alpha)) / s_out
        m, e = quantize_multiplier_signed(ident)
        ma, ea = quantize_multiplier_signed(alpha_real)
        p = UnaryParams(kind="leaky16", multiplier=m, shift=e, multiplier_alpha=ma, shift_alpha=ea, **q, **base)
        if x.dtype == "int8":
            return _with_table(p, _leaky_quant(INT8_VALUES, p, lo, hi))
        return p
    if op == "elu":
        return _with_table(UnaryParams(kind="table", **q, **base), _float_lut(_elu_f32, s_in, zp_in, s_out, zp_out))
    if op == "hard_swish":
        om, oe, rm, re_ = hard_swish_multipliers(s_in, s_out)
        if oe > 0:
            raise c.fail(node, graph, f"int8 hard_swish: input scale {s_in:.9g} / output scale {s_out:.9g} is too "
                                      "large (TFLM needs an output multiplier exponent <= 0)")
        return _with_table(UnaryParams(kind="table", **q, **base),
                           hard_swish_int8(INT8_VALUES, zp_in, zp_out, om, oe, rm, re_))
    if op == "log_softmax":
        if (float(np.float32(s_out)), zp_out) != (float(np.float32(LOG_SOFTMAX_OUTPUT[0])), LOG_SOFTMAX_OUTPUT[1]):
            raise c.fail(node, graph, f"int8 log_softmax output {y.name!r} must have scale 16/256 and zero point "
                                      f"127 (got {s_out:.9g}, {zp_out})")
        try:
            m, e, rd, rs, diff_min = log_softmax_params(s_in)
        except ValueError as exc:
            raise c.fail(node, graph, f"int8 log_softmax: input scale {s_in:.9g} is not supported ({exc})") from None
        return UnaryParams(kind="log_softmax", input_multiplier=m, input_left_shift=e, reverse_scaling_divisor=rd,
                           reverse_scaling_right_shift=rs, diff_min=diff_min, **q, **base)
    raise c.fail(node, graph, f"no {x.dtype} {op}")


def _with_table(p: UnaryParams, values: np.ndarray) -> UnaryParams:
    import dataclasses

    return dataclasses.replace(p, kind="table", table=_table_of(values))


_FLOAT_FNS = {
    "abs": np.abs, "neg": np.negative, "ceil": np.ceil, "floor": np.floor, "round": np.round,
    "sqrt": np.sqrt, "square": np.square,
}
_FLOAT64_FNS = {"exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos}


def _cast(x: np.ndarray, to: str) -> np.ndarray:
    if to == "bool":
        return x != 0
    if to == "float32":
        return x.astype(np.float32)
    if x.dtype.kind == "f":
        v = np.trunc(x.astype(np.float64))
        v = np.where(np.isfinite(v), v, 0).astype(np.int64)
    else:
        v = x.astype(np.int64)
    info = np.iinfo(np.dtype(to))
    if info.min == 0:  # unsigned: modulo 2^bits
        return (v & ((1 << info.bits) - 1)).astype(to)
    bits = info.bits
    return (((v + (1 << (bits - 1))) & ((1 << bits) - 1)) - (1 << (bits - 1))).astype(to)


def _reference_float(p: UnaryParams, x: np.ndarray, a: np.ndarray | None) -> np.ndarray:
    f = x.astype(np.float32)
    with np.errstate(all="ignore"):
        if p.op in _FLOAT_FNS:
            return _FLOAT_FNS[p.op](f).astype(np.float32)
        if p.op in _FLOAT64_FNS:
            return _FLOAT64_FNS[p.op](f.astype(np.float64)).astype(np.float32)
        if p.op == "rsqrt":
            return (np.float32(1.0) / np.sqrt(f)).astype(np.float32)
        if p.op == "elu":
            return np.where(f < 0, np.expm1(f.astype(np.float64)).astype(np.float32), f).astype(np.float32)
        if p.op == "hard_swish":
            return (f * np.minimum(np.float32(6), np.maximum(np.float32(0), f + np.float32(3))) / np.float32(6)
                    ).astype(np.float32)
        if p.op == "leaky_relu":
            return np.where(f > 0, f, f * np.float32(p.alpha)).astype(np.float32)
        if p.op == "prelu":
            assert a is not None
            fb, ab = np.broadcast_arrays(f, a.astype(np.float32))
            return np.where(fb >= 0, fb, fb * ab).astype(np.float32)
        if p.op == "log_softmax":
            mx = f.max(axis=-1, keepdims=True)
            s = np.exp((f - mx).astype(np.float64)).sum(axis=-1, keepdims=True)
            return ((f - mx).astype(np.float64) - np.log(s)).astype(np.float32)
    raise ValueError(f"no float32 {p.op}")


def reference(p: UnaryParams, x: np.ndarray, a: np.ndarray | None = None) -> np.ndarray:
    if p.kind == "float":
        return _reference_float(p, x, a)
    if p.kind == "table":
        return np.asarray(p.table, dtype=np.int64)[x.astype(np.uint8)].astype(p.out_dtype)
    if p.kind == "cast":
        return _cast(x, p.out_dtype)
    if p.kind == "zeros":
        return np.zeros(p.shape, dtype=p.out_dtype)
    if p.kind == "logical_not":
        return np.logical_not(x)
    lo, hi = (-128, 127) if p.dtype == "int8" else (-32768, 32767)
    if p.kind == "abs16raw":
        return _i16(np.abs(x.astype(np.int64))).astype(np.int16)
    if p.kind == "abs16":
        return _abs_quant(x, p, lo, hi).astype(p.out_dtype)
    if p.kind == "rsqrt16":
        return rsqrt_quantized(x, p, lo, hi).astype(p.out_dtype)
    if p.kind == "leaky16":
        return _leaky_quant(x, p, lo, hi).astype(p.out_dtype)
    if p.kind == "log_softmax":
        return log_softmax_int8(p, x)
    if p.kind == "prelu":
        assert a is not None
        xb, ab = np.broadcast_arrays(x.astype(np.int64), a.astype(np.int64))
        v = xb - p.input_zero_point
        pos = _mbqm(v, p.multiplier, p.shift)
        neg = _mbqm(_quant.wrap32(v * (ab - p.alpha_zero_point)), p.multiplier_alpha, p.shift_alpha)
        return np.clip(np.where(v >= 0, pos, neg) + p.output_zero_point, lo, hi).astype(p.out_dtype)
    raise ValueError(f"unknown unary kernel kind {p.kind!r}")
