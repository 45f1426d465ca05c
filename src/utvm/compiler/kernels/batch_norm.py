"""batch_norm that no pass could fold: y = x * multiplier[c] + offset[c] over the last axis, float32
(utvm.ops.batch_norm).

With constant parameters `prepare` has already computed multiplier = scale / sqrt(var + eps) and
offset = bias - mean * multiplier (float32); they become two tables. With run-time parameters the kernel
computes the same two float32 vectors first, into `scratch` (sqrtf: uses libm; IEEE division and square
root are correctly rounded, so the factors equal numpy's float32 ones). Each element is read just before
its output is written, so the output may share the input's buffer.
"""

from __future__ import annotations

import math

from utvm.compiler.kernels import KernelCode, KernelContext, register
from utvm.compiler.kernels.cemit import for_loop, lines
from utvm.ops.batch_norm import BatchNormParams


@register("batch_norm")
def batch_norm(ctx: KernelContext) -> KernelCode:
    p: BatchNormParams = ctx.params()
    x_t = ctx.in_tensor(0)
    assert x_t is not None
    size = math.prod(x_t.shape)
    ch = p.channels
    rows = size // ch if ch else 0
    x, y = ctx.inputs[0], ctx.outputs[0]
    apply = for_loop("r", 0, rows, [f"const float* const xr = {x} + r * {ch};", f"float* const yr = {y} + r * {ch};",
                                    for_loop("c", 0, ch, "yr[c] = xr[c] * mult[c] + off[c];")])
    if p.multiplier is not None and p.offset is not None:
        mult = ctx.table("float", p.multiplier, "multiplier")
        off = ctx.table("float", p.offset, "offset")
        return KernelCode(body=lines(f"const float* const mult = {mult};", f"const float* const off = {off};", apply,
                                     "return 0;"), inplace=(0,))
    scale, bias, mean, var = (ctx.inputs[i] for i in range(1, 5))
    sqrtf, eps = ctx.libm("sqrtf"), ctx.float_literal(p.epsilon)
    factors = for_loop("c", 0, ch, [f"mult[c] = {scale}[c] / {sqrtf}({var}[c] + {eps});",
                                    f"off[c] = {bias}[c] - {mean}[c] * mult[c];"])
    head = [f"float* const mult = (float*)(void*){ctx.scratch};", f"float* const off = mult + {ch};", factors]
    return KernelCode(body=lines(head, apply, "return 0;"), scratch_bytes=8 * ch, inplace=(0,))
