"""Unary activations: relu, relu6, clip, logistic, tanh; float32, int8, int16 (utvm.ops.activation).

int8: every one is a function of one int8 value, and `prepare` already holds its 256 outputs (the
reference reads the same table), so the kernel is a lookup `y = table[(uint8_t)x]`: no arithmetic at all,
bit-exact by construction, 256 bytes of flash.

int16 (relu, relu6): y = clamp(MBQM(x - zp_in, m, e) + zp_out, act_min, act_max) per element with the shared
requantization helper, or, for TFLM's relu6 (`requantize` False), y = clamp(x, act_min, act_max).

float32: relu / relu6 / clip clamp (an infinite bound is no test; NaN passes through, as numpy's
minimum/maximum leave it); logistic = 1 / (1 + expf(-x)); tanh = tanhf(x) (both use libm).
Every kernel reads x[i] just before writing y[i], so the output may share the input's buffer.
"""

from __future__ import annotations

import math

from utvm.compiler.kernels import KernelCode, KernelContext, register
from utvm.compiler.kernels.cemit import block, fill, for_loop, lines
from utvm.ops.activation import SIGMOID_TABLE_U16, ActivationParams


@register("relu", "relu6", "clip", "logistic", "tanh")
def activation(ctx: KernelContext) -> KernelCode:
    p: ActivationParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    size = math.prod(p.shape)
    if p.dtype == "int8":
        if len(p.table) != 256:
            raise ctx.error(f"int8 {p.op} needs a 256-entry table, prepare gave {len(p.table)}")
        table = ctx.table("int8_t", list(p.table), "table")
        stmt = f"{y}[i] = {table}[(uint8_t){x}[i]];"
    elif p.dtype == "int16" and p.op in ("logistic", "tanh"):
        stmt = _lut16(ctx, p, x, y)
    elif p.dtype == "int16":
        if p.requantize:
            rq = ctx.helper("requant", p.rounding)
            stmt = (f"int32_t r = {rq}((int32_t){x}[i] - ({p.input_zero_point}), {p.multiplier}, {p.shift}) + "
                    f"({p.output_zero_point});")
        else:
            stmt = f"int32_t r = {x}[i];"
        stmt = lines(stmt, f"r = r < {p.act_min} ? {p.act_min} : (r > {p.act_max} ? {p.act_max} : r);",
                     f"{y}[i] = (int16_t)r;")
    elif p.dtype == "float32":
        if p.op == "logistic":
            stmt = f"{y}[i] = 1.0f / (1.0f + {ctx.libm('expf')}(-{x}[i]));"
        elif p.op == "tanh":
            stmt = f"{y}[i] = {ctx.libm('tanhf')}({x}[i]);"
        else:  # an infinite bound is no test
            lo = ctx.float_literal(p.min) if p.min != -math.inf else None
            hi = ctx.float_literal(p.max) if p.max != math.inf else None
            stmt = lines(f"float v = {x}[i];", lo and block(f"if (v < {lo})", f"v = {lo};"),
                         hi and block(f"if (v > {hi})", f"v = {hi};"), f"{y}[i] = v;")
    else:
        raise ctx.error(f"no {p.op} kernel for dtype {p.dtype}")
    return KernelCode(body=lines(for_loop("i", 0, size, stmt), "return 0;"), inplace=(0,))


# TFLM's int16 logistic / tanh after the rescale of x to v: interpolation in the sigmoid table @T@ (stored as
# entry - 32768), @Y@ the output element.
_LOGISTIC16 = """\
const uint32_t uh = a >> 9;
uint32_t r = 0x7FFFu << 10;
if (uh < 255u) {
  const uint32_t ua = (uint32_t)(@T@[uh] + 32768);
  const uint32_t ub = (uint32_t)(@T@[uh + 1u] + 32768);
  r = (ua << 9) + (a & 0x1FFu) * (ub - ua);
}
r = v >= 0 ? r + (1u << 9) : (1u << 25) - r + (1u << 9) - 1u;
@Y@ = (int16_t)(r >> 10);"""
_TANH16 = """\
const uint32_t uh = a >> 8;
int32_t r = (int32_t)(0xFFFFu << 8);
if (uh < 255u) {
  const uint32_t ua = (uint32_t)(@T@[uh] + 32768);
  const uint32_t ub = (uint32_t)(@T@[uh + 1u] + 32768);
  r = (int32_t)((ua << 8) + (a & 0xFFu) * (ub - ua));
}
r = v >= 0 ? r - (1 << 23) + (1 << 7) : -r + (1 << 23) + (1 << 7) - 1;
@Y@ = (int16_t)(r >> 8);"""


def _lut16(ctx: KernelContext, p: ActivationParams, x: str, y: str) -> str:
    """TFLM's int16 logistic/tanh: rescale, then interpolate in the sigmoid table (stored as entry - 32768,
    which fits int16: 512 bytes of flash)."""
    table = ctx.table("int16_t", [v - 32768 for v in SIGMOID_TABLE_U16], "sigmoid")
    rnd = (1 << (p.shift - 1)) if p.shift > 0 else 0
    return lines(f"const int32_t v = ((int32_t){x}[i] * {p.multiplier} + {rnd}) >> {p.shift};",
                 "const uint32_t a = (uint32_t)(v < 0 ? -v : v);",
                 fill(_LOGISTIC16 if p.op == "logistic" else _TANH16, T=table, Y=f"{y}[i]"))
