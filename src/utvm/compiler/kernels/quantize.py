"""quantize (float32 -> int8/uint8, int8/uint8 -> int8/uint8) and dequantize (int8/uint8 -> float32)
(utvm.ops.quantize).

* requantize (int8/uint8 -> int8/uint8) and per-tensor dequantize are functions of one 8-bit value: the
  kernel looks up a 256-entry table, indexed by the input's byte, computed by the op's own `reference` on
  all 256 inputs (bit-exact by construction; no arithmetic, and no floating point for dequantize's
  double-precision product either). The table's element type is the output's C type (int8_t/uint8_t).
* per-channel dequantize: one 256-entry float table per channel (scale[c] * (q - zp[c]) rounded once to
  float32, the reference's formula), selected by the channel index of the loops.
* float32 -> int8/uint8: q = x / scale in float32, rounded half away from zero the way the reference does
  it (|q| + 0.5 in float32, then truncated), plus the zero point, saturated to the output type. No libm:
  a value beyond +-256 saturates whatever the zero point (int8 or uint8), so it is clamped before the
  conversion to int32.
"""

from __future__ import annotations

import math

import numpy as np

from utvm.compiler.kernels import C_TYPES, KernelCode, KernelContext, c_literal, offset_term, register
from utvm.ops import quantize as qop
from utvm.ops.quantize import QuantizeParams

_RANGES = {"int8": (-128, 127), "uint8": (0, 255)}


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
        if p.axis is not None:
            return _dequantize_per_channel(ctx, p)
        table = _table_of_reference(ctx, p, "float")
        return KernelCode(body=f"for (int32_t i = 0; i < {size}; ++i) {{\n  {y}[i] = {table}[(uint8_t){x}[i]];\n}}"
                               "\nreturn 0;")
    if p.output_dtype not in _RANGES:
        raise ctx.error(f"no quantize kernel to {p.output_dtype}")
    otype = C_TYPES[p.output_dtype]
    if p.input_dtype in _RANGES:
        table = _table_of_reference(ctx, p, otype)
        return KernelCode(body=f"for (int32_t i = 0; i < {size}; ++i) {{\n  {y}[i] = {table}[(uint8_t){x}[i]];\n}}"
                               "\nreturn 0;", inplace=(0,))
    if p.input_dtype != "float32":
        raise ctx.error(f"no quantize kernel from {p.input_dtype}")
    lo, hi = _RANGES[p.output_dtype]
    clamp = ctx.helper("clamp_i32")
    scale = c_literal(p.output_scale, "float32")
    body = f"""\
for (int32_t i = 0; i < {size}; ++i) {{
  const float q = {x}[i] / {scale};
  const float a = (q < 0.0f ? -q : q) + 0.5f;
  /* floor(a) for a >= 0 by truncation; from 256 on saturates int8/uint8 for any zero point (NaN too) */
  const int32_t r = a < 256.0f ? (int32_t)a : 256;
  const int32_t v = (q < 0.0f ? -r : r){offset_term(p.output_zero_point)};
  {y}[i] = ({otype}){clamp}(v, {lo}, {hi});
}}
return 0;"""
    return KernelCode(body=body)


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
    body = f"""\
int32_t i = 0;
for (int32_t o = 0; o < {outer}; ++o) {{
  for (int32_t c = 0; c < {channels}; ++c) {{
    const float* const tc = {table} + c * 256;
    for (int32_t k = 0; k < {inner}; ++k) {{
      {y}[i] = tc[(uint8_t){x}[i]];
      ++i;
    }}
  }}
}}
return 0;"""
    return KernelCode(body=body)
