"""quantize (float32 -> int8, int8 -> int8) and dequantize (int8 -> float32) (utvm.ops.quantize).

* int8 -> int8 (requantize) and per-tensor dequantize are functions of one int8 value: the kernel looks
  up a 256-entry table computed by the op's own `reference` on all 256 inputs (bit-exact by
  construction; no arithmetic, and no floating point for dequantize's double-precision product either).
* per-channel dequantize: one 256-entry float table per channel (scale[c] * (q - zp[c]) rounded once to
  float32, the reference's formula), selected by the channel index of the loops.
* float32 -> int8: q = x / scale in float32, rounded half away from zero the way the reference does it
  (|q| + 0.5 in float32, then truncated), plus the zero point, saturated to int8. No libm: a value
  beyond +-256 saturates whatever the zero point, so it is clamped before the conversion to int32.
"""

from __future__ import annotations

import math

import numpy as np

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, offset_term, register
from utvm.ops import quantize as qop
from utvm.ops.quantize import QuantizeParams

INT8_VALUES = np.arange(-128, 128, dtype=np.int64)


def _by_byte(values: np.ndarray) -> np.ndarray:
    """Outputs for inputs -128..127 reordered into a table indexed by the input's byte (0..255)."""
    table = np.empty(256, dtype=values.dtype)
    table[INT8_VALUES & 0xFF] = values
    return table


@register("quantize", "dequantize")
def quantize(ctx: KernelContext) -> KernelCode:
    p: QuantizeParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    size = math.prod(p.shape)
    if p.op == "dequantize":
        if p.axis is not None:
            return _dequantize_per_channel(ctx, p)
        table = ctx.table("float", _by_byte(qop.reference(p, INT8_VALUES.astype(np.int8))), "table")
        return KernelCode(body=f"for (int32_t i = 0; i < {size}; ++i) {{\n  {y}[i] = {table}[(uint8_t){x}[i]];\n}}"
                               "\nreturn 0;")
    if p.input_dtype == "int8":
        table = ctx.table("int8_t", _by_byte(qop.reference(p, INT8_VALUES.astype(np.int8))), "table")
        return KernelCode(body=f"for (int32_t i = 0; i < {size}; ++i) {{\n  {y}[i] = {table}[(uint8_t){x}[i]];\n}}"
                               "\nreturn 0;", inplace=(0,))
    if p.input_dtype != "float32":
        raise ctx.error(f"no quantize kernel from {p.input_dtype}")
    clamp = ctx.helper("clamp_i32")
    scale = c_literal(p.output_scale, "float32")
    body = f"""\
for (int32_t i = 0; i < {size}; ++i) {{
  const float q = {x}[i] / {scale};
  const float a = (q < 0.0f ? -q : q) + 0.5f;
  /* floor(a) for a >= 0 by truncation; anything from 256 on saturates int8 for any zero point (NaN too) */
  const int32_t r = a < 256.0f ? (int32_t)a : 256;
  const int32_t v = (q < 0.0f ? -r : r){offset_term(p.output_zero_point)};
  {y}[i] = (int8_t){clamp}(v, -128, 127);
}}
return 0;"""
    return KernelCode(body=body)


def _dequantize_per_channel(ctx: KernelContext, p: QuantizeParams) -> KernelCode:
    axis = p.axis if p.axis is not None and p.axis >= 0 else len(p.shape) + int(p.axis or 0)
    channels = p.shape[axis]
    if len(p.scales) != channels:
        raise ctx.error(f"per-channel dequantize has {len(p.scales)} scales for {channels} channels on axis {axis}")
    rows = []
    for s, z in zip(p.scales, p.zero_points, strict=True):
        rows.append(_by_byte((np.float64(s) * (INT8_VALUES - int(z))).astype(np.float32)))
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
