"""quantize (float32 -> int8/uint8/int16, integer requantization between int8/uint8/int16/int32) and
dequantize (int8/uint8/int16 -> float32) (utvm.ops.quantize).

* requantize (int8/uint8 -> int8/uint8) and per-tensor dequantize are functions of one 8-bit value: the
  kernel looks up a 256-entry table, indexed by the input's byte, computed by the op's own `reference` on
  all 256 inputs (bit-exact by construction; no arithmetic, and no floating point for dequantize's
  double-precision product either). The table's element type is the output's C type (int8_t/uint8_t).
* per-channel dequantize: one 256-entry float table per channel (scale[c] * (q - zp[c]) rounded once to
  float32, the reference's formula), selected by the channel index of the loops.
* float32 -> int8/uint8: q = x / scale in float32, rounded half away from zero the way the reference does
  it (|q| + 0.5 in float32, then truncated), plus the zero point, saturated to the output type. No libm:
  a value beyond +-256 saturates whatever the zero point (int8 or uint8), so it is clamped before the
  conversion to int32. float32 -> int16 is the same with the saturation point 65536.
* int16 / int32 inputs (too many values for a table): TFLite's Requantize computed per element, x - zp_in
  and + zp_out in wrapping int32 arithmetic (through uint32), the int32 requantization helper of the op's
  rounding, clamped to the output type. int8 -> int16 / int32 are 256-entry tables like int8 -> int8.
* int16 dequantize: float(double(scale) * (x - zp)), TFLite's formula, in double precision (no libm).
"""

from __future__ import annotations

import math

import numpy as np

from utvm.compiler.kernels import C_TYPES, KernelCode, KernelContext, offset_term, register
from utvm.compiler.kernels.cemit import for_loop, lines
from utvm.ops import quantize as qop
from utvm.ops.quantize import QuantizeParams

_RANGES = {"int8": (-128, 127), "uint8": (0, 255)}
_OUT_RANGES = {**_RANGES, "int16": (-32768, 32767), "int32": (-(2**31), 2**31 - 1)}


def _all_values(dtype: str) -> np.ndarray:
    """Every value of the 8-bit type `dtype`, as int64."""
    lo, hi = _RANGES[dtype]
    return np.arange(lo, hi + 1, dtype=np.int64)


def _by_byte(values: np.ndarray, dtype: str = "int8") -> np.ndarray:
    """Outputs for every input of the 8-bit type `dtype` (ascending) reordered into a table indexed by the
    input's byte (0..255)."""
    table = np.empty(256, dtype=values.dtype)
    table[_all_values(dtype) & 0xFF] = values
    return table


def _table_of_reference(ctx: KernelContext, p: QuantizeParams, ctype: str) -> str:
    inputs = _all_values(p.input_dtype)
    return ctx.table(ctype, _by_byte(qop.reference(p, inputs.astype(p.input_dtype)), p.input_dtype), "table")


@register("quantize", "dequantize")
def quantize(ctx: KernelContext) -> KernelCode:
    p: QuantizeParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    size = math.prod(p.shape)
    if p.op == "dequantize":
        if p.input_dtype == "int16":
            if p.axis is not None:
                raise ctx.error("per-channel int16 dequantize has no kernel (constant folding computes it)")
            return KernelCode(body=_per_element(size, f"{y}[i] = (float)({float(p.input_scale)!r} * "
                                                      f"(double)((int32_t){x}[i]{offset_term(-p.input_zero_point)}));"))
        if p.axis is not None:
            return _dequantize_per_channel(ctx, p)
        table = _table_of_reference(ctx, p, "float")
        return KernelCode(body=_per_element(size, f"{y}[i] = {table}[(uint8_t){x}[i]];"))
    if p.output_dtype not in _OUT_RANGES:
        raise ctx.error(f"no quantize kernel to {p.output_dtype}")
    otype = C_TYPES[p.output_dtype]
    if p.input_dtype in _RANGES:
        table = _table_of_reference(ctx, p, otype)
        same = C_TYPES[p.input_dtype][:-2].lstrip("u") == otype[:-2].lstrip("u")  # same element size
        return KernelCode(body=_per_element(size, f"{y}[i] = {table}[(uint8_t){x}[i]];"), inplace=(0,) if same else ())
    if p.input_dtype in ("int16", "int32"):
        return _requantize_wide(ctx, p, size)
    if p.input_dtype != "float32":
        raise ctx.error(f"no quantize kernel from {p.input_dtype}")
    lo, hi = _OUT_RANGES[p.output_dtype]
    sat = 65536 if p.output_dtype == "int16" else 256
    clamp = ctx.helper("clamp_i32")
    scale = ctx.float_literal(p.output_scale)
    return KernelCode(body=_per_element(size, [
        f"const float q = {x}[i] / {scale};",
        "const float a = (q < 0.0f ? -q : q) + 0.5f;",
        f"/* floor(a) for a >= 0 by truncation; from {sat} on saturates {p.output_dtype} for any zero point "
        "(NaN too) */",
        f"const int32_t r = a < {sat}.0f ? (int32_t)a : {sat};",
        f"const int32_t v = (q < 0.0f ? -r : r){offset_term(p.output_zero_point)};",
        f"{y}[i] = ({otype}){clamp}(v, {lo}, {hi});"]))


def _per_element(size: int, body: str | list[str]) -> str:
    """`body` for every element i of the tensor, then `return 0;`."""
    return lines(for_loop("i", 0, size, body), "return 0;")


def _dequantize_per_channel(ctx: KernelContext, p: QuantizeParams) -> KernelCode:
    axis = p.axis if p.axis is not None and p.axis >= 0 else len(p.shape) + int(p.axis or 0)
    channels = p.shape[axis]
    if len(p.scales) != channels:
        raise ctx.error(f"per-channel dequantize has {len(p.scales)} scales for {channels} channels on axis {axis}")
    rows = []
    values = _all_values(p.input_dtype)
    for s, z in zip(p.scales, p.zero_points, strict=True):
        rows.append(_by_byte((np.float64(s) * (values - int(z))).astype(np.float32), p.input_dtype))
    table = ctx.table("float", np.concatenate(rows), "table")
    outer = math.prod(p.shape[:axis])
    inner = math.prod(p.shape[axis + 1:])
    x, y = ctx.inputs[0], ctx.outputs[0]
    row = for_loop("k", 0, inner, [f"{y}[i] = tc[(uint8_t){x}[i]];", "++i;"])
    loops = for_loop("o", 0, outer, for_loop("c", 0, channels, [f"const float* const tc = {table} + c * 256;", row]))
    return KernelCode(body=lines("int32_t i = 0;", loops, "return 0;"))


def _requantize_wide(ctx: KernelContext, p: QuantizeParams, size: int) -> KernelCode:
    """int16 / int32 -> int8 / int16 / int32: TFLite's Requantize per element (wrapping int32 offsets)."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    rq = ctx.helper("requant", p.rounding)
    otype = C_TYPES[p.output_dtype]
    lo, hi = _OUT_RANGES[p.output_dtype]
    store = f"{y}[i] = ({otype})v;"
    if p.output_dtype != "int32":
        store = f"{y}[i] = ({otype}){ctx.helper('clamp_i32')}(v, {lo}, {hi});"
    zin, zout = int(p.input_zero_point), int(p.output_zero_point)
    body = _per_element(size, [
        f"const int32_t d = (int32_t)((uint32_t)(int32_t){x}[i] - (uint32_t){ctx.literal(zin, 'int32')});",
        f"const int32_t v = (int32_t)((uint32_t){rq}(d, {p.multiplier}, {p.shift}) + "
        f"(uint32_t){ctx.literal(zout, 'int32')});", store])
    same = C_TYPES[p.input_dtype] == otype
    return KernelCode(body=body, inplace=(0,) if same else ())
