"""softmax over one axis; float32, int8 (-> int8 or int16) and int16.

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

int8 -> int16 (TFLM; output scale 1/65536, zero point -32768): the same with k + 15 and -32768.

int16 -> int16 (TFLM's SoftmaxInt16, last axis, output scale 1/32768, zero point 0): (m, e) =
QuantizeMultiplier(s_in * beta / (10 / 65535)); per element exp = LUT(clamp(MBQM(x - max, m, e) + 32767)) in
a 513-entry table of exp on [-10, 0] (Q0.15, TFLite's gen_lut, computed here in float32 as TFLM does); the
sum's reciprocal from a table of 1 / (1 + x) on [0, 1] after normalising by its leading zeros h; y =
clamp((exp * recip + 2^(30 - h)) >> (31 - h), 0, 32767). Lookups interpolate linearly on the low 7 bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from utvm.ir.graph import Graph, Node
from utvm.ops import _common as c
from utvm.ops import _quant

OPS: tuple[str, ...] = ("softmax",)

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
    #: the output dtype (int8 input: int8 or int16)
    out_dtype: str = ""
    #: int16: TFLM's 513-entry LUTs (exp on [-10, 0], 1 / (1 + x) on [0, 1]), Q0.15
    exp_lut: tuple[int, ...] = ()
    recip_lut: tuple[int, ...] = ()


def attrs_of(node: Node) -> SoftmaxAttrs:
    return SoftmaxAttrs(int(node.attrs.get("axis", -1)), float(node.attrs.get("beta", 1.0)))


def infer(node: Node, graph: Graph) -> list[c.OutType]:
    c.check_count(node, graph, 1)
    x = c.req(node, graph, 0)
    c.check_dtype(node, graph, x, ("float32", "int8", "int16"), "input")
    at = attrs_of(node)
    if not -len(x.shape) <= at.axis < len(x.shape):
        raise c.fail(node, graph, f"axis {at.axis} is out of range for input shape {list(x.shape)}")
    out_dtype = x.dtype
    if x.dtype == "int8" and node.outputs and node.outputs[0] in graph.tensors:
        if graph.tensors[node.outputs[0]].dtype == "int16":
            out_dtype = "int16"  # TFLM's int8 -> int16 softmax
    if x.dtype == "int16" and at.axis % len(x.shape) != len(x.shape) - 1:
        raise c.fail(node, graph, "int16 softmax works over the last axis only")
    return [(tuple(x.shape), out_dtype)]


def prepare(node: Node, graph: Graph, rounding: str = "single") -> SoftmaxParams:
    (_, out_dtype), = infer(node, graph)
    rounding = _quant.kernel_rounding(rounding, node.op)
    x, y = c.req(node, graph, 0), c.out(node, graph)
    at = attrs_of(node)
    axis = at.axis % len(x.shape)
    base = dict(dtype=x.dtype, shape=tuple(x.shape), axis=axis, beta=at.beta,
                rounding=rounding, out_dtype=out_dtype)
    if x.dtype == "float32":
        return SoftmaxParams(**base)
    s_in, _ = c.per_tensor(node, graph, x, "input")
    s_out, zp_out = c.per_tensor(node, graph, y, "output")
    f32 = np.float32
    if out_dtype == "int16":
        want = (1.0 / 32768, 0) if x.dtype == "int16" else (1.0 / 65536, -32768)
        if zp_out != want[1] or abs(f32(s_out) - f32(want[0])) > f32(0.001) * f32(want[0]):
            raise c.fail(node, graph, f"{x.dtype} -> int16 softmax output {y.name!r} must have scale {want[0]:.9g} "
                                      f"and zero point {want[1]} (got {s_out:.9g}, {zp_out})")
    if x.dtype == "int16":
        real = float(f32(s_in)) * float(f32(at.beta)) / (10.0 / 65535.0)
        m, e = _quant.quantize_multiplier(real, "double")
        return SoftmaxParams(**base, input_multiplier=m, input_left_shift=e,
                             exp_lut=gen_lut_int16(np.exp, -10.0, 0.0),
                             recip_lut=gen_lut_int16(lambda v: np.float32(1.0) / (np.float32(1.0) + v), 0.0, 1.0))
    if out_dtype == "int8" and (s_out, zp_out) != (1.0 / 256, -128):
        raise c.fail(node, graph, f"int8 softmax output {y.name!r} must have scale 1/256 and zero point -128 "
                                  f"(got {s_out:.9g}, {zp_out})")
    max_real = float((1 << 30) - 1) if rounding == "single" else float((1 << 31) - 1)
    real = min(at.beta * s_in * float(1 << (31 - SCALED_DIFF_INTEGER_BITS)), max_real)
    if not real > 1.0:
        raise c.fail(node, graph, f"int8 softmax needs beta * input scale > 2**-26 (beta {at.beta}, scale {s_in:.9g})")
    m, e = _quant.quantize_multiplier_greater_than_one(real, rounding)
    diff_min = -_quant.calculate_input_radius(SCALED_DIFF_INTEGER_BITS, e)
    return SoftmaxParams(**base, input_multiplier=m, input_left_shift=e, diff_min=diff_min)


def gen_lut_int16(fn, lo: float, hi: float) -> tuple[int, ...]:  # noqa: ANN001
    """TFLite's gen_lut<float, int16_t, int16_t>(fn, lo, hi, -1, 1): 512 samples of fn on [lo, hi] in Q0.15,
    each biased by half the midpoint interpolation error, plus fn(hi); float32 arithmetic throughout (fn in
    float64, rounded to float32: a correctly rounded expf)."""
    f32 = np.float32

    def f(v: np.ndarray) -> np.ndarray:
        return np.asarray(fn(np.asarray(v, np.float32).astype(np.float64)), np.float64).astype(np.float32)

    steps = 512
    step = (f32(hi) - f32(lo)) / f32(steps)
    half = step / f32(2)
    inv = f32(65536) / (f32(1) - f32(-1))
    i = np.arange(steps).astype(np.float32)
    val = f(f32(lo) + i * step)
    mid = f(f32(lo) + i * step + half)
    nxt = f(f32(lo) + (i + f32(1)) * step)
    rnd = _quant.round_half_away
    sample = rnd((val * inv).astype(np.float32))
    interp = rnd(((nxt * inv + sample) / f32(2)).astype(np.float32))
    bias = rnd(((interp - rnd((mid * inv).astype(np.float32))) / f32(2)).astype(np.float32))
    lut = np.clip(sample - bias, -32768, 32767)
    last = np.clip(rnd((f(np.asarray([hi], np.float32)) * inv).astype(np.float32)), -32768, 32767)
    return c.ints(np.concatenate([lut, last]).astype(np.int64))


def _wrap16(v: np.ndarray) -> np.ndarray:
    return ((np.asarray(v, np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def lut_lookup(value: np.ndarray, lut: tuple[int, ...]) -> np.ndarray:
    """TFLite's int16 LUTLookup: 512 segments, linear interpolation on the low 7 bits."""
    t = np.asarray(lut, np.int64)
    v = np.asarray(value, np.int64)
    index = 256 + (v >> 7)
    offset = v & 0x7F
    base = t[index]
    slope = _wrap16(t[index + 1] - base)
    return _wrap16(base + ((slope * offset + 64) >> 7))


def _softmax_int16(p: SoftmaxParams, x: np.ndarray) -> np.ndarray:
    xi = x.astype(np.int64)
    diff = xi - xi.max(axis=-1, keepdims=True)
    scaled = _quant.multiply_by_quantized_multiplier(diff, p.input_multiplier, p.input_left_shift, "double")
    exp = lut_lookup(np.clip(scaled + 32767, -32768, 32767), p.exp_lut)
    total = _quant.wrap32(exp.sum(axis=-1, keepdims=True))
    hp1 = _quant.count_leading_zeros_u32(total)
    shifted = ((total << (hp1 - 1)) + (1 << 13)) >> 14
    recip = lut_lookup(np.clip(shifted - ((1 << 15) + (1 << 16)), -32768, 32767), p.recip_lut)
    right = 31 - hp1
    out = (exp * recip + (np.int64(1) << (right - 1))) >> right
    return np.clip(out, 0, 32767).astype(np.int16)


def reference(p: SoftmaxParams, x: np.ndarray) -> np.ndarray:
    if p.dtype == "int16":
        return _softmax_int16(p, x)
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
    bits = 16 if p.out_dtype == "int16" else 8
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    unsat = _quant.rounding_divide_by_pot(prod, bits_over_unit + 31 - bits)
    y = np.clip(unsat + lo, lo, hi)
    y = np.where(live, y, lo)
    return np.moveaxis(y, -1, p.axis).astype(p.out_dtype or "int8")
