"""Unary activations: relu, relu6, clip, logistic, tanh; float32 and int8 (utvm.ops.activation).

int8: every one is a function of one int8 value, and `prepare` already holds its 256 outputs (the
reference reads the same table), so the kernel is a lookup `y = table[(uint8_t)x]`: no arithmetic at all,
bit-exact by construction, 256 bytes of flash.

float32: relu / relu6 / clip clamp (an infinite bound is no test; NaN passes through, as numpy's
minimum/maximum leave it); logistic = 1 / (1 + expf(-x)); tanh = tanhf(x) (both use libm).
Every kernel reads x[i] just before writing y[i], so the output may share the input's buffer.
"""

from __future__ import annotations

import math

from utvm.compiler.kernels import KernelCode, KernelContext, c_literal, register
from utvm.ops.activation import ActivationParams


@register("relu", "relu6", "clip", "logistic", "tanh")
def activation(ctx: KernelContext) -> KernelCode:
    p: ActivationParams = ctx.params()
    x, y = ctx.inputs[0], ctx.outputs[0]
    size = math.prod(p.shape)
    uses_libm = False
    if p.dtype == "int8":
        if len(p.table) != 256:
            raise ctx.error(f"int8 {p.op} needs a 256-entry table, prepare gave {len(p.table)}")
        table = ctx.table("int8_t", list(p.table), "table")
        stmt = f"{y}[i] = {table}[(uint8_t){x}[i]];"
    elif p.dtype == "float32":
        if p.op == "logistic":
            stmt = f"{y}[i] = 1.0f / (1.0f + expf(-{x}[i]));"
            uses_libm = True
        elif p.op == "tanh":
            stmt = f"{y}[i] = tanhf({x}[i]);"
            uses_libm = True
        else:
            lines = [f"float v = {x}[i];"]
            if p.min != -math.inf:
                lo = c_literal(p.min, "float32")
                lines.append(f"if (v < {lo}) {{\n  v = {lo};\n}}")
            if p.max != math.inf:
                hi = c_literal(p.max, "float32")
                lines.append(f"if (v > {hi}) {{\n  v = {hi};\n}}")
            lines.append(f"{y}[i] = v;")
            stmt = "\n".join(lines)
    else:
        raise ctx.error(f"no {p.op} kernel for dtype {p.dtype}")
    body = "\n".join("  " + ln for ln in stmt.splitlines())
    return KernelCode(body=f"for (int32_t i = 0; i < {size}; ++i) {{\n{body}\n}}\nreturn 0;", inplace=(0,),
                      uses_libm=uses_libm)
